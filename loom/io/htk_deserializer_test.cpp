#include "loom/io/htk_deserializer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "loom/io/io_test_util.h"
#include "loom/io/minibatch_source.h"

namespace loom {
namespace {

using namespace testing_io;

void put_be(std::string& out, uint32_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(char((v >> (8 * i)) & 0xff));
}

// An HTK file of `frames` frames of `dim` values: frame t, value i is 100 * base + 10 t + i.
std::string htk_file(const std::string& name, size_t frames, size_t dim, int base,
                     int kind = 9 /* USER */) {
  std::string out;
  put_be(out, uint32_t(frames), 4);
  put_be(out, 100000, 4);
  put_be(out, uint32_t(dim * 4), 2);
  put_be(out, uint32_t(kind), 2);
  for (size_t t = 0; t < frames; ++t)
    for (size_t i = 0; i < dim; ++i) {
      float v = float(100 * base + 10 * t + i);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      put_be(out, bits, 4);
    }
  return write_temp(name, out);
}

float value(int base, size_t t, size_t i) {
  return float(100 * base + 10 * t + i);
}

TEST(HTKFeatureDeserializer, ReadsUtterancesRangesAndContext) {
  const std::string a = htk_file("a.htk", 4, 2, 1), b = htk_file("b.htk", 6, 2, 2);
  const std::string scp = write_temp("feat.scp", "utt1=" + a + "\n" + b + "[2,4]\n");
  HTKFeatureDeserializer d({{"f", {.shape = 2, .scp = {scp}}}});
  ASSERT_EQ(d.keys(), (std::vector<std::string>{"utt1", "b"}));
  auto chunk = d.load_chunk(0);
  EXPECT_EQ(chunk->sequences[0].num_samples, 4u);
  EXPECT_EQ(chunk->sequences[1].num_samples, 3u);  // frames 2..4
  const std::vector<float>& v = chunk->streams[0].values_f32;
  ASSERT_EQ(v.size(), 14u);
  EXPECT_EQ(v[2], value(1, 1, 0));
  EXPECT_EQ(v[8], value(2, 2, 0));  // the range's first frame
  EXPECT_EQ(v[13], value(2, 4, 1));

  // context (1, 2): frame t is frames t-1 .. t+2, clamped to the utterance
  HTKFeatureDeserializer c({{"f", {.shape = 2, .context = {1, 2}, .scp = {scp}}}});
  EXPECT_EQ(c.stream_infos()[0].sample_shape, (NDShape{8}));
  auto cc = c.load_chunk(0);
  const std::vector<float>& w = cc->streams[0].values_f32;
  // utterance 1, frame 0: frames 0 (clamped), 0, 1, 2
  EXPECT_EQ((std::vector<float>(w.begin(), w.begin() + 8)),
            (std::vector<float>{value(1, 0, 0), value(1, 0, 1), value(1, 0, 0), value(1, 0, 1),
                                value(1, 1, 0), value(1, 1, 1), value(1, 2, 0), value(1, 2, 1)}));
  // utterance 1, frame 3: frames 2, 3, 3, 3
  EXPECT_EQ(w[3 * 8 + 0], value(1, 2, 0));
  EXPECT_EQ(w[3 * 8 + 6], value(1, 3, 0));
}

TEST(HTKFeatureDeserializer, DamagedInputNamesFileAndLine) {
  const std::string a = htk_file("ok.htk", 3, 2, 1);
  auto message = [](const std::string& scp_text, size_t dim = 2) {
    try {
      HTKFeatureDeserializer({{"f", {.shape = dim, .scp = {write_temp("bad.scp", scp_text)}}}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(a + "\n/nonexistent/x.htk\n").find("bad.scp:2: cannot open feature file"),
            std::string::npos);
  EXPECT_NE(message(a + "[1,7]\n").find("bad.scp:1: range [1,7] is outside"), std::string::npos);
  EXPECT_NE(message(a + "[3,x]\n").find("bad.scp:1: malformed range"), std::string::npos);
  EXPECT_NE(message(a, 3).find("frames of 2 values, stream 'f' has shape 3"), std::string::npos);
  std::string cut = htk_file("cut.htk", 3, 2, 1);
  std::filesystem::resize_file(cut, 12 + 3 * 8 - 4);
  EXPECT_NE(message(cut).find("cut.htk' (" + test_dir() +
                              "/bad.scp:1): damaged: the header says "
                              "3 frames of 8 bytes, the file holds 20 bytes"),
            std::string::npos)
      << message(cut);
  std::string header = write_temp("short.htk", "abc");
  EXPECT_NE(message(header).find("short.htk': the 12-byte header is cut short"), std::string::npos);
  EXPECT_NE(message(htk_file("c.htk", 3, 2, 1, 02000 | 6)).find("compressed features"),
            std::string::npos);
}

const char* kMLF =
    "#!MLF!#\n"
    "\"*/b.lab\"\n"
    "0 100000 s2\n"
    "100000 300000 s0\n"
    ".\n"
    "\"*/utt1.lab\"\n"
    "0 2 s1\n"
    "2 4 s2\n"
    ".\n";

TEST(HTKMLFDeserializer, LabelsFrameAlignedWithFeatures) {
  const std::string a = htk_file("a.htk", 4, 2, 1), b = htk_file("b.htk", 6, 2, 2);
  const std::string scp = write_temp("feat.scp", "utt1=" + a + "\n" + b + "[2,4]\n");
  const std::string map = write_temp("states.txt", "s0\ns1\ns2\n");
  const std::string mlf = write_temp("l.mlf", kMLF);
  auto features =
      std::make_shared<HTKFeatureDeserializer>(StreamDefs{{"f", {.shape = 2, .scp = {scp}}}});
  auto labels = std::make_shared<HTKMLFDeserializer>(
      map, StreamDefs{{"l", {.shape = 3, .is_sparse = true, .mlf = {mlf}}}});
  EXPECT_EQ(labels->keys(), (std::vector<std::string>{"b", "utt1"}));  // the MLF's order
  std::vector<std::shared_ptr<Deserializer>> both{features, labels};
  align_htk_by_key(both);
  EXPECT_EQ(labels->keys(), (std::vector<std::string>{"utt1", "b"}));
  MinibatchSource source(both, {.randomize = false, .max_sweeps = 1});
  Minibatch<StreamInformation> mb = source.next_minibatch(7);
  const NDArrayView& l = mb.at(source["l"]).data.data();
  EXPECT_EQ(l.csr_col_indices(), (std::vector<int32_t>{1, 1, 2, 2, 2, 0, 0}))
      << "utt1: s1 s1 s2 s2; b: s2 s0 s0";
  EXPECT_EQ(mb.at(source["f"]).data.sequence_lengths(), (std::vector<size_t>{4, 3}));

  // frame mode: frames of both streams stay together
  MinibatchSource frames(both, {.randomize = false, .max_sweeps = 1, .frame_mode = true});
  mb = frames.next_minibatch(7);
  EXPECT_EQ(mb.at(frames["f"]).number_of_sequences, 7u);
  EXPECT_EQ(mb.at(frames["l"]).data.data().csr_col_indices(),
            (std::vector<int32_t>{1, 1, 2, 2, 2, 0, 0}));
  EXPECT_EQ(mb.at(frames["f"]).data.data().to_vector<float>()[5 * 2], value(2, 3, 0));

  // phone boundaries: the first frame of each range holds 2
  HTKMLFDeserializer pb(map, {{"l", {.shape = 3, .mlf = {mlf}}}}, true);
  EXPECT_EQ(pb.load_chunk(0)->streams[0].values_f32, (std::vector<float>{2, 2, 1, 2, 1, 2, 1}));
}

TEST(HTKMLFDeserializer, BadLinesNameFileAndLine) {
  const std::string map = write_temp("states.txt", "s0\ns1\ns2\n");
  auto message = [&](const std::string& text, const std::string& mapping = "") {
    try {
      HTKMLFDeserializer(mapping.empty() ? map : mapping,
                         {{"l", {.shape = 3, .mlf = {write_temp("bad.mlf", text)}}}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\n0 2 s9\n.\n").find("bad.mlf:3: label 's9' is not in"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\n0 2 s1\n3 4 s2\n.\n")
                .find("bad.mlf:4: ranges are not consecutive"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\n1 2 s1\n.\n")
                .find("bad.mlf:3: the first range must start at frame 0"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\na.lab\n").find("bad.mlf:2: expected a quoted utterance name"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\nx 2 s1\n.\n").find("bad.mlf:3: the start 'x'"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\n0 2 s1\n").find("bad.mlf:3: the file ends inside"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a\"\n0 1 s1\n.\n", write_temp("dup.txt", "s0\ns1\ns0\n"))
                .find("dup.txt:3: label 's0' is listed twice"),
            std::string::npos);
  EXPECT_NE(message("#!MLF!#\n\"a.lab\"\n0 1 s1\n.\n\"*/a.lab\"\n0 1 s1\n.\n")
                .find("bad.mlf:5: utterance 'a' is given twice"),
            std::string::npos);
  EXPECT_THROW(HTKMLFDeserializer("/nonexistent/map", {{"l", {.shape = 3, .mlf = {"x"}}}}),
               IOError);
}

}  // namespace
}  // namespace loom
