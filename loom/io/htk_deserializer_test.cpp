#include "loom/io/htk_deserializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

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
  EXPECT_NE(message(header).find("short.htk' (" + test_dir() +
                                 "/bad.scp:1): the 12-byte header is cut short"),
            std::string::npos);
}

// A compressed HTK file (parmKind USER_C) of frames of `dim` values cvalue(t, i), quantised as
// HTK does: per dimension A = 2 I / (max - min), B = (max + min) I / (max - min), I = 32767,
// v = round(A x - B); `samples` replaces the header's nSamples (frames + 4: A and B).
float cvalue(size_t t, size_t i) {
  return float(std::sin(0.7 * double(t) + double(i)) * double(i + 1));
}
std::string compressed_file(const std::string& name, size_t frames, size_t dim,
                            std::vector<float>* tolerance = nullptr, int samples = -1) {
  std::vector<float> a(dim), b(dim);
  for (size_t i = 0; i < dim; ++i) {
    float lo = cvalue(0, i), hi = lo;
    for (size_t t = 0; t < frames; ++t) {
      lo = std::min(lo, cvalue(t, i));
      hi = std::max(hi, cvalue(t, i));
    }
    a[i] = 2 * 32767.0f / (hi - lo);
    b[i] = (hi + lo) * 32767.0f / (hi - lo);
    if (tolerance) tolerance->push_back(1.0f / a[i]);  // half a step, and rounding
  }
  std::string out;
  put_be(out, samples < 0 ? uint32_t(frames + 4) : uint32_t(samples), 4);
  put_be(out, 100000, 4);
  put_be(out, uint32_t(dim * 2), 2);
  put_be(out, 9 | 02000, 2);
  for (const std::vector<float>* v : {&a, &b})
    for (float x : *v) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      put_be(out, bits, 4);
    }
  for (size_t t = 0; t < frames; ++t)
    for (size_t i = 0; i < dim; ++i)
      put_be(out, uint16_t(int16_t(std::lround(a[i] * cvalue(t, i) - b[i]))), 2);
  return write_temp(name, out);
}

TEST(HTKFeatureDeserializer, ReadsCompressedFilesWithinTheQuantisation) {
  std::vector<float> tolerance;
  const std::string c = compressed_file("c.htk", 5, 3, &tolerance);
  EXPECT_EQ(std::filesystem::file_size(c), 12 + (5 + 4) * 6u);  // A and B count as 4 frames
  HTKFeatureDeserializer d(
      {{"f", {.shape = 3, .scp = {write_temp("c.scp", c + "\nr=" + c + "[2,3]\n")}}}});
  ASSERT_EQ(d.frames(), (std::vector<size_t>{5, 2}));
  auto chunk = d.load_chunk(0);
  const std::vector<float>& v = chunk->streams[0].values_f32;
  ASSERT_EQ(v.size(), 7 * 3u);
  for (size_t t = 0; t < 7; ++t)
    for (size_t i = 0; i < 3; ++i) {
      const size_t frame = t < 5 ? t : t - 5 + 2;  // the range starts at frame 2
      EXPECT_NEAR(v[t * 3 + i], cvalue(frame, i), tolerance[i]) << "frame " << t << " value " << i;
    }
}

TEST(HTKFeatureDeserializer, DamagedCompressedFilesNameFileAndWhat) {
  auto message = [](const std::string& file, size_t dim = 3) {
    try {
      HTKFeatureDeserializer({{"f", {.shape = dim, .scp = {write_temp("bad.scp", file + "\n")}}}});
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no DataError");
  };
  const std::string where = "' (" + test_dir() + "/bad.scp:1): ";
  std::string cut = compressed_file("cut_ab.htk", 5, 3);
  std::filesystem::resize_file(cut, 12 + 20);  // A and B need 24 bytes
  EXPECT_NE(message(cut).find("cut_ab.htk" + where +
                              "the compressed file's scale and bias (A and B, 3 float32 each "
                              "after the header) are cut short"),
            std::string::npos)
      << message(cut);
  std::string few = compressed_file("few.htk", 0, 3, nullptr, 3);
  EXPECT_NE(message(few).find("few.htk" + where +
                              "damaged header: nSamples 3 of a compressed file must count the "
                              "scale and bias as 4 frames"),
            std::string::npos)
      << message(few);
  std::string sizes = compressed_file("sizes.htk", 5, 3, nullptr, 7);
  EXPECT_NE(message(sizes).find("sizes.htk" + where +
                                "damaged: the header says 7 frames of 6 bytes (4 of them the "
                                "compressed file's scale and bias), the file holds 54 bytes"),
            std::string::npos)
      << message(sizes);
  std::string odd = htk_file("odd.htk", 2, 2, 1, 9 | 02000);
  {
    std::fstream f(odd, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(9);
    f.put(char(7));  // sampSize 7
  }
  EXPECT_NE(message(odd).find("odd.htk" + where +
                              "damaged header: sampSize 7 is not a positive multiple of 2 "
                              "(int16 values of a compressed file)"),
            std::string::npos)
      << message(odd);
  std::string zero = compressed_file("zero.htk", 5, 3);
  {
    std::fstream f(zero, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12 + 4);
    f.write("\0\0\0\0", 4);  // A[1] = 0
  }
  EXPECT_NE(
      message(zero).find("zero.htk" + where + "damaged: the compressed file's scale A[1] = 0"),
      std::string::npos)
      << message(zero);
  // the frame size in values: 6 bytes of int16 are 3 values
  EXPECT_NE(message(compressed_file("dim.htk", 5, 3), 2)
                .find("frames of 3 values, stream 'f' "
                      "has shape 2"),
            std::string::npos);
}

TEST(HTKFeatureDeserializer, BroadcastStreamRepeatsItsFrameOverTheUtterance) {
  const std::string a = htk_file("a.htk", 4, 2, 1), b = htk_file("b.htk", 3, 2, 2);
  const std::string ia = htk_file("ia.htk", 1, 3, 7), ib = htk_file("ib.htk", 2, 3, 8);
  const std::string scp = write_temp("feat.scp", "ua=" + a + "\nub=" + b + "\n");
  // the i-vectors in another order; ub's is frame 1 of its file
  const std::string iscp = write_temp("ivec.scp", "ub=" + ib + "[1,1]\nua=" + ia + "\n");
  HTKFeatureDeserializer d(
      {{"f", {.shape = 2, .scp = {scp}}},
       {"iv", {.shape = 3, .context = {1, 0}, .scp = {iscp}, .broadcast = true}}});
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"ua", "ub"}));
  EXPECT_EQ(d.frames(), (std::vector<size_t>{4, 3}));
  EXPECT_EQ(d.stream_infos()[1].sample_shape, (NDShape{6}));
  auto chunk = d.load_chunk(0);
  const std::vector<float>& iv = chunk->streams[1].values_f32;
  ASSERT_EQ(iv.size(), 7 * 6u);
  EXPECT_EQ(chunk->streams[1].sample_begin, (std::vector<size_t>{0, 4, 7}));
  for (size_t t = 0; t < 7; ++t)
    for (size_t k = 0; k < 6; ++k)  // context (1, 0): the frame twice
      EXPECT_EQ(iv[t * 6 + k], t < 4 ? value(7, 0, k % 3) : value(8, 1, k % 3)) << t << " " << k;

  // a broadcast utterance holds one frame
  EXPECT_THROW(
      {
        try {
          HTKFeatureDeserializer({{"f", {.shape = 2, .scp = {scp}}},
                                  {"iv",
                                   {.shape = 3,
                                    .scp = {write_temp("two.scp", "ub=" + ib + "\n")},
                                    .broadcast = true}}});
        } catch (const DataError& e) {
          EXPECT_NE(std::string(e.what()).find("two.scp:1): utterance 'ub' of broadcast stream "
                                               "'iv' holds 2 frames; a broadcast stream's "
                                               "utterances hold one"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      DataError);

  // a deserializer of its own follows the features (CNTK's HTKFeatureDeserializer makes one
  // deserializer a stream); it cannot lead
  auto features =
      std::make_shared<HTKFeatureDeserializer>(StreamDefs{{"f", {.shape = 2, .scp = {scp}}}});
  auto ivectors = std::make_shared<HTKFeatureDeserializer>(
      StreamDefs{{"iv", {.shape = 3, .scp = {iscp}, .broadcast = true}}});
  EXPECT_THROW(align_htk_by_key({ivectors, features}), ArgumentError);
  std::vector<std::shared_ptr<Deserializer>> both{features, ivectors};
  align_htk_by_key(both);
  MinibatchSource source(both, {.randomize = false, .max_sweeps = 1});
  Minibatch<StreamInformation> mb = source.next_minibatch(7);
  EXPECT_EQ(mb.at(source["iv"]).data.sequence_lengths(), (std::vector<size_t>{4, 3}));
  const std::vector<float> got = mb.at(source["iv"]).data.data().to_vector<float>();
  EXPECT_EQ(got[3 * 3], value(7, 0, 0));            // ua, frame 3
  EXPECT_EQ(got[(4 + 2) * 3 + 2], value(8, 1, 2));  // ub, frame 2
}

TEST(HTKFeatureDeserializer, StreamsMatchedByKeyUnmatchedAndDuplicatedDropped) {
  const std::string a = htk_file("a.htk", 2, 1, 1), b = htk_file("b.htk", 3, 1, 2),
                    c = htk_file("c.htk", 1, 1, 3), g = htk_file("g.htk", 9, 1, 4);
  // stream g lists the keys in another order, lacks c and lists d twice
  const std::string scp =
      write_temp("f.scp", "a=" + a + "\nb=" + b + "\nc=" + c + "\nd=" + a + "\n");
  const std::string gscp = write_temp(
      "g.scp", "d=" + g + "[0,1]\nb=" + g + "[4,6]\nd=" + g + "[0,1]\na=" + g + "[0,1]\n");
  testing::internal::CaptureStderr();
  HTKFeatureDeserializer d({{"f", {.shape = 1, .scp = {scp}}}, {"g", {.shape = 1, .scp = {gscp}}}});
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("stream 'g': 2 utterances under keys listed more than once are "
                          "dropped"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("stream 'g' lacks 2 of the utterances of stream 'f'; they are dropped"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"a", "b"}));
  auto chunk = d.load_chunk(0);
  EXPECT_EQ(chunk->streams[1].values_f32,
            (std::vector<float>{value(4, 0, 0), value(4, 1, 0), value(4, 4, 0), value(4, 5, 0),
                                value(4, 6, 0)}));
  EXPECT_EQ(chunk->streams[0].values_f32[2], value(2, 0, 0));
  // the same key of another length
  const std::string h = write_temp("h.scp", "a=" + g + "[0,2]\n");
  testing::internal::CaptureStderr();  // h lacks b, c and d
  EXPECT_THROW(
      {
        try {
          HTKFeatureDeserializer(
              {{"f", {.shape = 1, .scp = {scp}}}, {"h", {.shape = 1, .scp = {h}}}});
        } catch (const DataError& e) {
          EXPECT_NE(std::string(e.what()).find("h.scp:1: utterance 'a' of stream 'h' holds 3 "
                                               "frames, stream 'f' 2"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      DataError);
  testing::internal::GetCapturedStderr();
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

TEST(HTKMLFDeserializer, UtterancesWithoutLabelsAreDroppedWithAWarning) {
  const std::string a = htk_file("a.htk", 4, 2, 1), b = htk_file("b.htk", 6, 2, 2);
  const std::string scp =
      write_temp("feat.scp", "x=" + a + "\nutt1=" + a + "\nb=" + b + "[2,4]\ny=" + b + "\n");
  auto features =
      std::make_shared<HTKFeatureDeserializer>(StreamDefs{{"f", {.shape = 2, .scp = {scp}}}});
  auto labels = std::make_shared<HTKMLFDeserializer>(
      write_temp("states.txt", "s0\ns1\ns2\n"),
      StreamDefs{{"l", {.shape = 3, .mlf = {write_temp("l.mlf", kMLF)}}}});
  std::vector<std::shared_ptr<Deserializer>> both{features, labels};
  testing::internal::CaptureStderr();
  align_htk_by_key(both);
  const std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("WARNING: MinibatchSource: stream 'l' lacks 2 of the 4 utterances of "
                          "stream 'f'; they are dropped"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(features->keys(), (std::vector<std::string>{"utt1", "b"}));
  EXPECT_EQ(labels->keys(), features->keys());
  MinibatchSource source(both, {.randomize = false, .max_sweeps = 1});
  EXPECT_EQ(source.samples_per_sweep(), 7u);
  // labels first: they lead, the features follow in their order
  auto labels_first = std::make_shared<HTKMLFDeserializer>(
      write_temp("states.txt", "s0\ns1\ns2\n"),
      StreamDefs{{"l", {.shape = 3, .mlf = {write_temp("l.mlf", kMLF)}}}});
  align_htk_by_key({labels_first, features});
  EXPECT_EQ(features->keys(), (std::vector<std::string>{"b", "utt1"}));
  // nothing in common
  auto other = std::make_shared<HTKFeatureDeserializer>(
      StreamDefs{{"f", {.shape = 2, .scp = {write_temp("o.scp", "o=" + a + "\n")}}}});
  testing::internal::CaptureStderr();
  EXPECT_THROW(align_htk_by_key({other, labels}), DataError);
  testing::internal::GetCapturedStderr();
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
