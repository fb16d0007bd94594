#include "loom/io/image_header.h"

#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "loom/io/image_test_util.h"

namespace loom {
namespace {

using namespace testing_io;

std::optional<ImageHeader> header_of(const std::string& text) {
  return read_image_header(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

TEST(ImageHeader, ReadsTheSizeOfEveryFormatOpenCvWrites) {
  // Width 67 and height 45 (OpenJPEG's smallest sides are 32) as OpenCV writes them, each
  // format's header read.
  const std::vector<std::pair<std::string, uint32_t>> formats{
      {".png", 3}, {".jpg", 3}, {".bmp", 3}, {".tiff", 3}, {".webp", 3}, {".ppm", 3}, {".pgm", 1},
      {".pbm", 1}, {".pam", 3}, {".ras", 3}, {".hdr", 3},  {".jp2", 3},  {".pfm", 3}};
  for (const auto& [extension, channels] : formats) {
    cv::Mat image = position_image(67, 45);
    if (channels == 1) cv::cvtColor(image, image, cv::COLOR_BGR2GRAY);
    if (extension == ".pfm" || extension == ".hdr") image.convertTo(image, CV_32F, 1 / 255.0);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(cv::imencode(extension, image, bytes)) << extension;
    const std::optional<ImageHeader> h = read_image_header(bytes);
    ASSERT_TRUE(h.has_value()) << extension;
    EXPECT_EQ(h->width, 67u) << extension;
    EXPECT_EQ(h->height, 45u) << extension;
    EXPECT_EQ(h->channels, channels) << extension;
    EXPECT_EQ(h->pixels(), 67u * 45u) << extension;
  }
}

TEST(ImageHeader, ReadsDeclaredSizesWithoutTheImageData) {
  const std::optional<ImageHeader> png = read_image_header(declaring_size(".png", 30000, 20000));
  ASSERT_TRUE(png.has_value());
  EXPECT_EQ(png->width, 30000u);
  EXPECT_EQ(png->height, 20000u);
  const std::optional<ImageHeader> jpeg = read_image_header(declaring_size(".jpg", 30000, 65535));
  ASSERT_TRUE(jpeg.has_value());
  EXPECT_EQ(jpeg->width, 30000u);
  EXPECT_EQ(jpeg->height, 65535u);
  EXPECT_GT(jpeg->pixels(), kMaxImagePixels);
  // Bytes before a marker, which libjpeg skips, hide no frame header.
  std::vector<uint8_t> padded = declaring_size(".jpg", 30000, 30000);
  padded.insert(padded.begin() + 2, {'x', 0xFF, 0x00, 'y'});
  EXPECT_EQ(read_image_header(padded)->pixels(), 900000000u);
  // BigTIFF: 8-byte offsets, counts and values; a width beyond 2^32 counts as 2^32.
  std::string big("II+\0\x08\0\0\0\x10\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 24);
  big += std::string("\0\x01\x10\0\x01\0\0\0\0\0\0\0\0\0\0\0\x02\0\0\0", 20);
  big += std::string("\x01\x01\x03\0\x01\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0", 20);
  EXPECT_EQ(header_of(big)->width, uint64_t(1) << 32);
  EXPECT_EQ(header_of(big)->height, 5u);
  // TIFF sizes of any integer type libtiff reads (SSHORT, BYTE); a negative one counts as 2^32.
  std::string tiff("II*\0\x08\0\0\0\x02\0", 10);
  tiff += std::string("\0\x01\x08\0\x01\0\0\0\xFF\x7F\0\0", 12);  // width: SSHORT 32767
  tiff += std::string("\x01\x01\x01\0\x01\0\0\0\xC8\0\0\0", 12);  // height: BYTE 200
  EXPECT_EQ(header_of(tiff)->width, 32767u);
  EXPECT_EQ(header_of(tiff)->height, 200u);
  tiff[19] = '\xFF';  // width -1
  EXPECT_EQ(header_of(tiff)->width, uint64_t(1) << 32);
  // The largest sizes each format can declare, without overflow.
  EXPECT_EQ(read_image_header(declaring_size(".png", UINT32_MAX, UINT32_MAX))->pixels(),
            uint64_t(UINT32_MAX) * UINT32_MAX);
  // A WebP canvas (VP8X: 24-bit sizes less one), a top-down BMP (negative height), PNM text.
  const std::string vp8x = std::string("RIFF\0\0\0\0WEBPVP8X\x0A\0\0\0\x10\0\0\0", 24) +
                           std::string("\xFF\xFF\x00\x0F\x27\x00", 6);
  EXPECT_EQ(header_of(vp8x)->width, 65536u);
  EXPECT_EQ(header_of(vp8x)->height, 10000u);
  EXPECT_EQ(header_of(vp8x)->channels, 4u);
  std::string bmp(54, '\0');
  bmp[0] = 'B', bmp[1] = 'M', bmp[14] = 40, bmp[18] = 16, bmp[28] = 24;  // width 16, 24 bits
  bmp[22] = '\xF0', bmp[23] = bmp[24] = bmp[25] = '\xFF';                // height -16
  EXPECT_EQ(header_of(bmp)->width, 16u);
  EXPECT_EQ(header_of(bmp)->height, 16u);
  EXPECT_EQ(header_of("P6\n# a comment 1 2\n 40000  50000\n255\n")->pixels(), 2000000000u);
  EXPECT_EQ(header_of("P5 000099999999999 4\n")->width, uint64_t(1) << 32);  // any larger
  EXPECT_EQ(header_of("P7\nWIDTH 7\nHEIGHT 9\nDEPTH 4\nTUPLTYPE RGB_ALPHA\nENDHDR\n")->channels,
            4u);
  EXPECT_EQ(header_of("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 30 +X 40\n")->width, 40u);
}

// The text formats' numbers are read as OpenCV reads them, quirks included, so that no header
// OpenCV accepts declares fewer pixels here than OpenCV allocates.
TEST(ImageHeader, TextHeadersReadAsOpenCvReadsThem) {
  // PxM: the byte after a number goes with it ('#' is no comment there); a comment ends at '\r'.
  EXPECT_EQ(header_of("P5 30000#30000\n255\n")->pixels(), 900000000u);
  EXPECT_EQ(header_of("P6\n# comment\r30000 30000\n255\n")->pixels(), 900000000u);
  // PAM: a value may start on the line after its name; comments end at '\r'.
  EXPECT_EQ(header_of("P7\n#\rWIDTH \n30000\nHEIGHT 2\nDEPTH 1\nENDHDR\n")->width, 30000u);
  // PFM (atoi): a negative size, which OpenCV's int could wrap to any other, counts as 2^32.
  EXPECT_EQ(header_of("PF\n30000 -4294937296\n-1\n")->height, uint64_t(1) << 32);
  EXPECT_EQ(header_of("Pf\n30000 2\n-1\n")->channels, 1u);
  // HDR: lines as fgets reads them into 128 bytes: the "\n" after 127 bytes ends the header.
  const std::string hdr =
      "#?RADIANCE\n" + std::string(127, 'x') + "\n-Y 30000 +X 20000\n\n-Y 1 +X 1\n";
  EXPECT_EQ(header_of(hdr)->pixels(), 600000000u);
}

// Damaged files that OpenCV still decodes have the size OpenCV decodes as their header's: bytes
// of each format's header changed, inserted or erased at random (fixed seed). A file read here as
// declaring more than 2^20 pixels is not decoded (no test allocates gigabytes); one declaring
// more than OpenCV decodes would be refused early, never let through.
TEST(ImageHeader, DamagedFilesOpenCvDecodesHaveTheirHeadersRead) {
  std::mt19937 rng(7);
  testing::internal::CaptureStderr();  // OpenCV's complaints about the damaged files
  size_t decoded = 0;
  for (const std::string extension : {".png", ".jpg", ".bmp", ".tiff", ".webp", ".ppm", ".pgm",
                                      ".pam", ".ras", ".hdr", ".jp2", ".pfm"}) {
    cv::Mat image = position_image(67, 45);
    if (extension == ".pgm") cv::cvtColor(image, image, cv::COLOR_BGR2GRAY);
    if (extension == ".pfm" || extension == ".hdr") image.convertTo(image, CV_32F, 1 / 255.0);
    std::vector<uint8_t> good;
    ASSERT_TRUE(cv::imencode(extension, image, good)) << extension;
    for (int mutant = 0; mutant < 300; ++mutant) {
      std::vector<uint8_t> bytes = good;
      for (size_t changes = 1 + rng() % 4; changes > 0; --changes) {
        const size_t at = rng() % std::min<size_t>(bytes.size(), 200);
        const uint8_t value = rng() % 2 ? ' ' : uint8_t(rng());
        switch (rng() % 3) {
          case 0:
            bytes[at] = value;
            break;
          case 1:
            bytes.insert(bytes.begin() + ptrdiff_t(at), value);
            break;
          default:
            bytes.erase(bytes.begin() + ptrdiff_t(at));
        }
      }
      const std::optional<ImageHeader> h = read_image_header(bytes);
      if (h && h->pixels() > (1u << 20)) continue;
      cv::Mat out;
      try {
        out = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
      } catch (const cv::Exception&) {
      }
      if (out.empty()) continue;
      ++decoded;
      ASSERT_TRUE(h.has_value()) << extension << " mutant " << mutant;
      EXPECT_EQ(h->width, uint64_t(out.cols)) << extension << " mutant " << mutant;
      EXPECT_EQ(h->height, uint64_t(out.rows)) << extension << " mutant " << mutant;
    }
  }
  testing::internal::GetCapturedStderr();
  EXPECT_GT(decoded, 1000u);  // the check saw many damaged files decode
}

TEST(ImageHeader, OtherFormatsAndDamagedHeadersAreUnknown) {
  for (const std::string& text :
       {std::string(), std::string("not an image"), std::string("\x89PNG\r\n\x1A\n", 8),
        std::string("\xFF\xD8\xFF\xDA\0\x02", 6), std::string("\xFF\xD8\xFF\xC0\0\x11", 6),
        std::string("BM"), std::string("II*\0\x08\0\0\0\x01\0", 10),
        std::string("RIFF\0\0\0\0WEBPVP8 ", 16), std::string("P6\n40000"),
        std::string("P5\n-3 4\n255\n"), std::string("#?RADIANCE\n\n-Z 3 +X 4\n"),
        std::string("\xFF\x4F\xFF\x51\0", 5),
        std::string("\0\0\0\x0CjP  \r\n\x87\n\0\0\0\x01jp2h", 20),
        std::string("v/1\x01\x02\0\0\0", 8)})  // OpenEXR: OpenCV's own limit
    EXPECT_FALSE(header_of(text).has_value()) << testing::PrintToString(text);
  // Every truncation of a real header is unknown or the header itself, never a read past the end.
  for (const std::string extension : {".png", ".jpg", ".bmp", ".tiff", ".webp", ".jp2"}) {
    const std::vector<uint8_t> bytes = encoded_image(extension, 67, 45);
    for (size_t n = 0; n < std::min<size_t>(bytes.size(), 400); ++n) {
      const std::optional<ImageHeader> h = read_image_header({bytes.data(), n});
      if (h) {
        EXPECT_EQ(h->pixels(), 67u * 45u) << extension << " cut at " << n;
      }
    }
  }
}

}  // namespace
}  // namespace loom
