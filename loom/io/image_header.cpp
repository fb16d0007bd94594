#include "loom/io/image_header.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace loom {

namespace {

// Bounds-checked reads of a file's bytes.
class Bytes {
 public:
  explicit Bytes(std::span<const uint8_t> b) : b_(b) {}
  size_t size() const { return b_.size(); }
  // Whether bytes [at, at + n) exist.
  bool has(size_t at, size_t n) const { return at <= b_.size() && n <= b_.size() - at; }
  uint8_t operator[](size_t at) const { return b_[at]; }
  const char* chars() const { return reinterpret_cast<const char*>(b_.data()); }
  // An n-byte unsigned integer (n <= 8) at `at`, of bytes that exist.
  uint64_t be(size_t at, size_t n) const {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | b_[at + i];
    return v;
  }
  uint64_t le(size_t at, size_t n) const {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | b_[at + i];
    return v;
  }
  bool starts(size_t at, std::string_view s) const {
    return has(at, s.size()) && std::string_view(chars() + at, s.size()) == s;
  }

 private:
  std::span<const uint8_t> b_;
};

using Header = std::optional<ImageHeader>;

// A size past 2^32, or a negative one (which a decoder refuses or wraps to another int), counts
// as 2^32: past any ceiling.
constexpr uint64_t kHuge = uint64_t(1) << 32;

Header make(uint64_t width, uint64_t height, uint32_t channels) {
  return ImageHeader{width, height, channels};
}

Header png(const Bytes& b) {
  // The IHDR chunk comes first: length, "IHDR", width, height, bit depth, color type.
  if (!b.starts(12, "IHDR") || !b.has(16, 10)) return std::nullopt;
  const uint8_t color = b[25];
  const uint32_t channels = color == 0 ? 1 : color == 4 ? 2 : color == 6 ? 4 : 3;
  return make(b.be(16, 4), b.be(20, 4), channels);
}

Header jpeg(const Bytes& b) {
  // Markers after SOI up to the first frame header (SOFn: C0-CF but C4 DHT, C8 JPG, CC DAC),
  // found as libjpeg finds them: bytes other than 0xFF before a marker, fill bytes 0xFF and
  // stuffed FF 00 pairs are skipped.
  size_t at = 2;
  for (;;) {
    while (b.has(at, 1) && b[at] != 0xFF) ++at;
    while (b.has(at, 1) && b[at] == 0xFF) ++at;
    if (!b.has(at, 1)) return std::nullopt;
    const uint8_t marker = b[at++];
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) continue;
    if (marker == 0xD9 || marker == 0xDA || !b.has(at, 2)) return std::nullopt;
    const bool frame =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) {  // length, precision, height, width, components
      if (!b.has(at, 8)) return std::nullopt;
      return make(b.be(at + 5, 2), b.be(at + 3, 2), b[at + 7]);
    }
    at += std::max<size_t>(b.be(at, 2), 2);
  }
}

Header bmp(const Bytes& b) {
  if (!b.has(14, 4)) return std::nullopt;
  const uint64_t info_size = b.le(14, 4);
  uint64_t width, height, bits;
  if (info_size == 12) {  // OS/2 1.x: 16-bit sizes
    if (!b.has(18, 8)) return std::nullopt;
    width = b.le(18, 2);
    height = b.le(20, 2);
    bits = b.le(24, 2);
  } else {  // 32-bit signed sizes; a negative height is a top-down image
    if (info_size < 16 || !b.has(18, 12)) return std::nullopt;
    const int64_t w = int32_t(uint32_t(b.le(18, 4))), h = int32_t(uint32_t(b.le(22, 4)));
    if (w < 0) return std::nullopt;
    width = uint64_t(w);
    height = uint64_t(std::abs(h));
    bits = b.le(28, 2);
  }
  return make(width, height, bits == 32 ? 4 : 3);
}

Header tiff(const Bytes& b) {
  // The first image's directory: its ImageWidth, ImageLength and SamplesPerPixel entries. BigTIFF
  // has 8-byte offsets, counts and inline values.
  const bool little = b[0] == 'I', big_tiff = b[2] == '+' || b[3] == '+';
  auto get = [&](size_t at, size_t n) { return little ? b.le(at, n) : b.be(at, n); };
  const size_t offset_size = big_tiff ? 8 : 4, count_size = big_tiff ? 8 : 2;
  const size_t entry_size = big_tiff ? 20 : 12;
  if (!b.has(4, big_tiff ? 12 : 4)) return std::nullopt;
  const uint64_t ifd = get(big_tiff ? 8 : 4, offset_size);
  if (!b.has(ifd, count_size)) return std::nullopt;
  const uint64_t n = get(ifd, count_size);
  if (n > b.size() / entry_size) return std::nullopt;
  // An entry's first value as libtiff reads an integer tag: any integer type, signed or not,
  // inline or at its offset; kHuge for a negative value or another type.
  auto value = [&](size_t entry) -> uint64_t {
    const uint64_t type = get(entry + 2, 2), count = get(entry + 4, offset_size);
    static constexpr uint8_t kSizes[19] = {0, 1, 0, 2, 4, 0, 1, 0, 2, 4, 0, 0, 0, 0, 0, 0, 8, 8, 8};
    const size_t size = type < 19 ? kSizes[type] : 0;
    const bool is_signed = type == 6 || type == 8 || type == 9 || type == 17;
    if (size == 0 || count == 0) return kHuge;
    size_t at = entry + 4 + offset_size;
    if (count > offset_size / size) at = get(at, offset_size);  // not inline
    if (!b.has(at, size)) return kHuge;
    const uint64_t v = get(at, size);
    if (is_signed && (v >> (8 * size - 1)) != 0) return kHuge;
    return std::min(v, kHuge);
  };
  std::optional<uint64_t> width, height;
  uint64_t samples = 1;
  for (uint64_t i = 0; i < n; ++i) {
    const size_t entry = ifd + count_size + entry_size * i;
    if (!b.has(entry, entry_size)) return std::nullopt;
    const uint64_t tag = get(entry, 2);
    if (tag == 256) width = value(entry);
    if (tag == 257) height = value(entry);
    if (tag == 277) samples = value(entry);
  }
  if (!width || !height) return std::nullopt;
  return make(*width, *height, uint32_t(std::min(samples, kHuge - 1)));
}

Header webp(const Bytes& b) {
  if (!b.has(20, 10)) return std::nullopt;
  if (b.starts(12, "VP8 ")) {  // lossy: frame tag, start code 9D 01 2A, 14-bit sizes
    if (b[23] != 0x9D || b[24] != 0x01 || b[25] != 0x2A) return std::nullopt;
    return make(b.le(26, 2) & 0x3FFF, b.le(28, 2) & 0x3FFF, 3);
  }
  if (b.starts(12, "VP8L")) {  // lossless: 0x2F, then 14 bits each of width - 1, height - 1
    if (b[20] != 0x2F) return std::nullopt;
    const uint64_t bits = b.le(21, 4);
    return make((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, (bits >> 28) & 1 ? 4 : 3);
  }
  if (b.starts(12, "VP8X")) {  // extended: flags, 3 reserved bytes, 24-bit canvas sizes - 1
    return make(b.le(24, 3) + 1, b.le(27, 3) + 1, (b[20] & 0x10) ? 4 : 3);
  }
  return std::nullopt;
}

Header sun_raster(const Bytes& b) {
  if (!b.has(0, 16)) return std::nullopt;
  const uint64_t depth = b.be(12, 4);
  return make(b.be(4, 4), b.be(8, 4), depth >= 24 ? uint32_t(depth / 8) : 1);
}

// The text formats' numbers are read as OpenCV's decoders read them, so that a header OpenCV
// accepts gives the size OpenCV allocates. White space and digits as in the C locale:
bool is_space(int c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}
bool is_digit(int c) {
  return c >= '0' && c <= '9';
}

// A decimal integer as strtol reads it: white space, a sign, digits (nullopt without digits).
std::optional<uint64_t> integer(std::string_view text, size_t& i) {
  while (i < text.size() && is_space(text[i])) ++i;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  const size_t digits = i;
  uint64_t v = 0;
  for (; i < text.size() && is_digit(text[i]); ++i)
    v = std::min(v * 10 + uint64_t(text[i] - '0'), kHuge);
  if (i == digits) return std::nullopt;
  return negative && v > 0 ? kHuge : v;
}

// PBM, PGM, PPM (P1-P6): white space and comments ('#' up to '\n' or '\r') before the digits,
// which end at any other byte, that byte read with them (OpenCV's ReadNumber).
std::optional<uint64_t> pxm_number(const Bytes& b, size_t& at) {
  auto next = [&]() -> int { return b.has(at, 1) ? b[at++] : -1; };
  int c = next();
  while (!is_digit(c)) {
    if (c == '#') {
      do c = next();
      while (c != '\n' && c != '\r' && c != -1);
      c = next();
    } else if (is_space(c)) {
      while (is_space(c)) c = next();
    } else {
      return std::nullopt;
    }
  }
  uint64_t v = 0;
  for (; is_digit(c); c = next()) v = std::min(v * 10 + uint64_t(c - '0'), kHuge);
  return v;
}

Header pxm(const Bytes& b) {
  size_t at = 2;
  const std::optional<uint64_t> width = pxm_number(b, at), height = pxm_number(b, at);
  if (!width || !height) return std::nullopt;
  return make(*width, *height, b[1] == '3' || b[1] == '6' ? 3 : 1);
}

// PFM: after "PF\n" (or "Pf\n"), each number the bytes up to one white space byte (at most
// 2048), as atoi reads them (OpenCV's read_number).
Header pfm(const Bytes& b) {
  if (!b.has(2, 1) || b[2] != '\n') return std::nullopt;
  size_t at = 3;
  auto number = [&]() -> std::optional<uint64_t> {
    const size_t begin = at;
    while (b.has(at, 1) && !is_space(b[at]) && at - begin < 2048) ++at;
    const std::string_view token(b.chars() + begin, at - begin);
    if (token.size() < 2048 && b.has(at, 1)) ++at;  // the white space
    size_t i = 0;
    return integer(token, i);
  };
  const std::optional<uint64_t> width = number(), height = number();
  if (!width || !height) return std::nullopt;
  return make(*width, *height, b[1] == 'F' ? 3 : 1);
}

// PAM (P7): "P7" and a line break, then fields up to ENDHDR, each a name of up to 8 bytes, white
// space and a value up to the end of its line ("WIDTH 640"), and '#' comments up to '\n' or
// '\r' (OpenCV's ReadPAMHeaderLine: the value starts after any white space, line breaks too,
// unless the name ends its line).
Header pam(const Bytes& b) {
  if (!b.has(2, 1) || (b[2] != '\n' && b[2] != '\r')) return std::nullopt;
  auto line_break = [&](size_t at) { return b[at] == '\n' || b[at] == '\r'; };
  std::optional<uint64_t> width, height, depth;
  size_t at = 3;
  for (;;) {
    while (b.has(at, 1) && is_space(b[at])) ++at;
    if (!b.has(at, 1)) return std::nullopt;
    if (b[at] == '#') {
      while (b.has(at, 1) && !line_break(at)) ++at;
      ++at;
      continue;
    }
    const size_t name_begin = at;
    while (b.has(at, 1) && !is_space(b[at]) && at - name_begin < 8) ++at;
    if (!b.has(at, 1) || !is_space(b[at])) return std::nullopt;
    const std::string_view name(b.chars() + name_begin, at - name_begin);
    std::string_view value;
    if (!line_break(at++)) {
      while (b.has(at, 1) && is_space(b[at])) ++at;
      const size_t value_begin = at;
      while (b.has(at, 1) && !line_break(at)) ++at;
      value = std::string_view(b.chars() + value_begin, at - value_begin);
    }
    if (name == "ENDHDR") break;
    size_t i = 0;
    if (name == "WIDTH") width = integer(value, i);
    if (name == "HEIGHT") height = integer(value, i);
    if (name == "DEPTH") depth = integer(value, i);
  }
  if (!width || !height) return std::nullopt;
  return make(*width, *height, uint32_t(std::min(depth.value_or(0), kHuge - 1)));
}

// Radiance HDR: lines as fgets reads them into 128 bytes (up to a '\n', at most 127 bytes), the
// "#?" line, header lines up to one starting with '\n', then the size as sscanf reads
// "-Y %d +X %d" (OpenCV's RGBE_ReadHeader).
Header radiance(const Bytes& b) {
  size_t at = 0;
  auto line = [&]() -> std::optional<std::string_view> {
    if (!b.has(at, 1)) return std::nullopt;
    const size_t begin = at;
    while (b.has(at, 1) && at - begin < 127)
      if (b[at++] == '\n') break;
    return std::string_view(b.chars() + begin, at - begin);
  };
  if (!line()) return std::nullopt;
  for (std::optional<std::string_view> l = line(); !l || (*l)[0] != '\n'; l = line())
    if (!l) return std::nullopt;
  std::optional<std::string_view> size = line();
  if (!size) return std::nullopt;
  const std::string_view text = size->substr(0, size->find('\0'));  // sscanf stops at a NUL
  size_t i = 0;
  auto literal = [&](std::string_view s) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (!text.substr(i).starts_with(s)) return false;
    i += s.size();
    return true;
  };
  if (!text.starts_with("-Y")) return std::nullopt;
  i = 2;
  const std::optional<uint64_t> height = integer(text, i);
  if (!height || !literal("+X")) return std::nullopt;
  const std::optional<uint64_t> width = integer(text, i);
  if (!width) return std::nullopt;
  return make(*width, *height, 3);
}

Header j2k_codestream(const Bytes& b, size_t at) {
  // SOC, SIZ: length, capabilities, Xsiz, Ysiz, XOsiz, YOsiz, 4 tile sizes, Csiz.
  if (!b.has(at, 42) || b.be(at, 4) != 0xFF4FFF51) return std::nullopt;
  const uint64_t x = b.be(at + 8, 4), y = b.be(at + 12, 4);
  const uint64_t x0 = b.be(at + 16, 4), y0 = b.be(at + 20, 4);
  if (x0 > x || y0 > y) return std::nullopt;
  return make(x - x0, y - y0, uint32_t(b.be(at + 40, 2)));
}

// The contents [begin, end) of the first box of `type` among the boxes in [at, end) of a JP2
// file; nullopt when there is none or a box is damaged.
std::optional<std::pair<size_t, size_t>> jp2_box(const Bytes& b, size_t at, size_t end,
                                                 std::string_view type) {
  while (at < end && b.has(at, 8)) {
    uint64_t length = b.be(at, 4);
    size_t header = 8;
    if (length == 1) {  // a 64-bit length follows the type
      if (!b.has(at, 16)) return std::nullopt;
      length = b.be(at + 8, 8);
      header = 16;
    } else if (length == 0) {  // to the end
      length = end - at;
    }
    if (length < header) return std::nullopt;
    length = std::min<uint64_t>(length, end - at);  // OpenJPEG reads a cut box to the end
    if (b.starts(at + 4, type)) return std::pair(at + header, size_t(at + length));
    at += length;
  }
  return std::nullopt;
}

Header jp2(const Bytes& b) {
  // The codestream's size, which is what OpenJPEG decodes (the header box's may differ).
  const auto codestream = jp2_box(b, 0, b.size(), "jp2c");
  if (!codestream) return std::nullopt;
  return j2k_codestream(b, codestream->first);
}

}  // namespace

std::optional<ImageHeader> read_image_header(std::span<const uint8_t> bytes) {
  const Bytes b(bytes);
  if (b.starts(0, "\x89PNG\r\n\x1A\n")) return png(b);
  if (b.starts(0, "\xFF\xD8")) return jpeg(b);
  if (b.starts(0, "BM")) return bmp(b);
  if (b.starts(0, std::string_view("II*\0", 4)) || b.starts(0, std::string_view("MM\0*", 4)) ||
      b.starts(0, std::string_view("II+\0\x08\0\0\0", 8)) ||
      b.starts(0, std::string_view("MM\0+\0\x08\0\0", 8)))
    return tiff(b);
  if (b.starts(0, "RIFF") && b.starts(8, "WEBP")) return webp(b);
  if (b.starts(0, "\x59\xA6\x6A\x95")) return sun_raster(b);
  if (b.has(0, 3) && b[0] == 'P' && is_space(b[2])) {
    if (b[1] >= '1' && b[1] <= '6') return pxm(b);
    if (b[1] == '7') return pam(b);
    if (b[1] == 'F' || b[1] == 'f') return pfm(b);
  }
  if (b.starts(0, "#?RADIANCE") || b.starts(0, "#?RGBE")) return radiance(b);
  if (b.starts(0, "\xFF\x4F\xFF\x51")) return j2k_codestream(b, 0);
  if (b.starts(0, std::string_view("\0\0\0\x0CjP  \r\n\x87\n", 12))) return jp2(b);
  return std::nullopt;
}

}  // namespace loom
