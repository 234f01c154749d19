#pragma once

// Hashing, comparison and randomness for credentials (ADR-0016), on OpenSSL's libcrypto.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::auth {

using Sha256Digest = std::array<unsigned char, 32>;

Sha256Digest sha256(std::string_view data);

// 64 lowercase hex digits.
std::string to_hex(const Sha256Digest& digest);

// The digest written as 64 hex digits (either case); nullopt when it is not one.
std::optional<Sha256Digest> digest_from_hex(std::string_view hex);

// Compares in time independent of where the digests differ.
bool constant_time_equal(const Sha256Digest& a, const Sha256Digest& b) noexcept;

// Fills `out` from the CSPRNG; throws dlock::InternalError when it cannot.
void random_bytes(unsigned char* out, std::size_t size);

// Every generated token starts with this, so a leaked one is recognisable (secret scanners).
inline constexpr std::string_view kTokenPrefix = "dlk_";
// Characters after the prefix: 32 random bytes in unpadded base64url (256 bits).
inline constexpr std::size_t kTokenRandomChars = 43;

// A fresh bearer token: kTokenPrefix + 43 characters of [A-Za-z0-9_-].
std::string random_token();

}  // namespace dlock::auth
