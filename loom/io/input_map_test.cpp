// next_minibatch keyed by graph variables: the data as the reader gives them, and bad input maps.
#include <gtest/gtest.h>

#include <fstream>

#include "loom/io/ctf_deserializer.h"
#include "loom/io/minibatch_source.h"

#include "loom/io/io_test_util.h"

namespace loom {
namespace {

using testing_io::write_temp;

StreamDefs xy_streams() {
  return {{"x", StreamDef{.field = "x", .shape = 2}},
          {"y", StreamDef{.field = "y", .shape = 3, .is_sparse = true}}};
}

// CNTK's: a file's streams come as sequences whatever the variable; a sample is a sequence of one
// step, which a variable without a sequence axis takes.
TEST(InputMap, EveryVariableGetsTheStreamAsTheReaderGivesIt) {
  std::string path = write_temp("rows.ctf", "|x 1 2 |y 0:1\n|x 3 4 |y 2:1\n|x 5 6 |y 1:1\n");
  MinibatchSource source(std::make_shared<CTFDeserializer>(path, xy_streams()),
                         {.randomize = false});
  Variable x = input_variable({2});
  Variable y = sequence::input_variable({3}, {.is_sparse = true});
  auto mb = source.next_minibatch(2, {{x, source["x"]}, {y, source["y"]}});
  const Value& xv = mb.at(x).data;
  EXPECT_TRUE(xv.is_sequence());
  EXPECT_EQ(xv.data().shape(), (NDShape{2, 1, 2}));
  EXPECT_EQ(xv.data().to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  const Value& yv = mb.at(y).data;
  EXPECT_TRUE(yv.is_sequence());
  EXPECT_TRUE(yv.is_sparse());
  EXPECT_EQ(yv.data().to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(mb.at(x).number_of_samples, 2u);
}

TEST(InputMap, MinibatchesAreIndexedByVariableOrStream) {
  std::string path = write_temp("index.ctf", "|x 1 2 |y 0:1\n|x 3 4 |y 2:1\n");
  MinibatchSource source(std::make_shared<CTFDeserializer>(path, xy_streams()),
                         {.randomize = false, .max_sweeps = 1});
  Variable features = input_variable({2}, {.name = "features"});
  Variable label = input_variable({3}, {.is_sparse = true, .name = "label"});
  // CNTK's data[label] after next_minibatch(n, input_map), on a const map as well.
  const auto data = source.next_minibatch(1, {{features, source["x"]}, {label, source["y"]}});
  EXPECT_EQ(data[label].number_of_samples, 1u);
  EXPECT_EQ(data[features].data.data().to_vector<float>(), (std::vector<float>{1, 2}));
  // CNTK's mb[reader.streams.labels] without an input map.
  auto mb = source.next_minibatch(1);
  EXPECT_EQ(mb[source["y"]].data.data().to_vector<float>(), (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(mb.size(), 2u);

  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no ArgumentError";
    return std::string();
  };
  // A key the minibatch does not hold is an error naming it and what there is, on one line;
  // nothing is inserted.
  Variable other = input_variable({1}, {.name = "weights"});
  std::string msg = message([&] { (void)data[other]; });
  EXPECT_NE(msg.find("no data for weights: Tensor[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("features: Tensor[2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("label: SparseTensor[3]"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  StreamInformation unknown{.name = "z", .id = 7};
  msg = message([&] { (void)mb[unknown]; });
  EXPECT_NE(msg.find("no data for stream 'z'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stream 'x'"), std::string::npos) << msg;
  EXPECT_EQ(mb.size(), 2u);
  // After the last sweep the minibatch is empty, and says so.
  auto end = source.next_minibatch(1, {{label, source["y"]}});
  ASSERT_TRUE(end.empty());
  msg = message([&] { (void)end[label]; });
  EXPECT_NE(msg.find("the minibatch is empty (its source has ended)"), std::string::npos) << msg;
}

TEST(InputMap, LongSequencesForABatchVariableAreAnError) {
  std::string path = write_temp("seqs.ctf", "0 |x 1 2 |y 0:1\n0 |x 3 4\n1 |x 5 6 |y 1:1\n");
  MinibatchSource source(std::make_shared<CTFDeserializer>(path, xy_streams()),
                         {.randomize = false});
  Variable x = input_variable({2}, {.name = "features"});
  try {
    source.next_minibatch(4, {{x, source["x"]}});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("features"), std::string::npos) << e.what();
  }
}

TEST(InputMap, StreamsOfAnotherSourceAreAnError) {
  std::string path = write_temp("rows2.ctf", "|x 1 2 |y 0:1\n");
  MinibatchSource a(std::make_shared<CTFDeserializer>(path, xy_streams()));
  MinibatchSource b(std::make_shared<CTFDeserializer>(
      path, StreamDefs{{"x", StreamDef{.field = "x", .shape = 2}}}));
  Variable y = input_variable({3}, {.is_sparse = true});
  EXPECT_THROW(b.next_minibatch(1, {{y, a["y"]}}), ArgumentError);
}

}  // namespace
}  // namespace loom
