// Fuzz target (f): the etcd record decoder (src/store/etcd/etcd_records.h) and the key layout
// it relies on (etcd_keys.h). The input is a serialized mvccpb::KeyValue, as a Range answer
// carries it; bytes that are not one are used as the value of a well-formed lock key. A value
// that is not a record must end as InternalError, never as a crash or undefined behaviour.

#include <cstddef>
#include <cstdint>
#include <string>

#include "dlock/errors.h"
#include "store/etcd/etcd_keys.h"
#include "store/etcd/etcd_records.h"

namespace etcd = dlock::store::etcd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  mvccpb::KeyValue kv;
  if (!kv.ParseFromString(bytes)) {
    kv.Clear();
    kv.set_key("/dlock/default/lock/fuzz");
    kv.set_value(bytes);
    kv.set_mod_revision(7);
  }
  try {
    (void)etcd::lock_info(kv);
  } catch (const dlock::InternalError&) {
  }
  try {
    (void)etcd::decode_session(kv);
  } catch (const dlock::InternalError&) {
  }
  // The layout round-trips: a lock key parses to the SPI key that formats back to it.
  if (const auto key = etcd::parse_lock_key(kv.key())) {
    if (etcd::format_lock_key(*key) != kv.key()) __builtin_trap();
  }
  if (const auto parts = etcd::parse_session_key(kv.key())) {
    // An index entry of a holder (ADR-0020) formats with the holders segment, not the locks one.
    const auto formatted = parts->holder
                               ? etcd::session_holder_key(parts->session_id, parts->lock_key)
                               : etcd::session_lock_key(parts->session_id, parts->lock_key);
    if (!parts->lock_key.empty() && formatted != kv.key()) __builtin_trap();
  }
  const auto end = etcd::prefix_range_end(kv.key());
  if (!kv.key().empty() && end != std::string(1, '\0') && !(kv.key() < end)) __builtin_trap();
  return 0;
}
