#include "auth/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "dlock/errors.h"

namespace dlock::auth {

Sha256Digest sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    throw InternalError("SHA-256 failed (OpenSSL EVP_Digest)");
  }
  return digest;
}

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(digest.size() * 2);
  for (const unsigned char byte : digest) {
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 0xF]);
  }
  return hex;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<Sha256Digest> digest_from_hex(std::string_view hex) {
  Sha256Digest digest{};
  if (hex.size() != digest.size() * 2) return std::nullopt;
  for (std::size_t i = 0; i < digest.size(); ++i) {
    const int high = hex_value(hex[2 * i]);
    const int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    digest[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return digest;
}

bool constant_time_equal(const Sha256Digest& a, const Sha256Digest& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void random_bytes(unsigned char* out, std::size_t size) {
  if (size == 0) return;
  if (RAND_bytes(out, static_cast<int>(size)) != 1) {
    throw InternalError("the random number generator failed (OpenSSL RAND_bytes)");
  }
}

std::string random_token() {
  static constexpr char kBase64Url[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  // 33 bytes = 44 characters; the last byte only pads the final group, and the 44th character
  // is dropped so exactly 256 random bits (43 characters, the last carrying 4 bits) remain.
  std::array<unsigned char, 33> bytes{};
  random_bytes(bytes.data(), 32);
  std::string token(kTokenPrefix);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const unsigned group = bytes[i] << 16 | bytes[i + 1] << 8 | bytes[i + 2];
    for (int shift = 18; shift >= 0; shift -= 6) token.push_back(kBase64Url[(group >> shift) & 63]);
  }
  token.resize(kTokenPrefix.size() + kTokenRandomChars);
  return token;
}

}  // namespace dlock::auth
