#pragma once

// The one place where errors become HTTP (contract C3).

#include <boost/json/object.hpp>
#include <exception>
#include <string>

#include "server/http_server.h"

namespace dlock::server {

Response json_response(unsigned status, std::string body);
// `extra`: more members of the error object (e.g. `delayed_until`, C3 "Lock-delay").
Response error_response(unsigned status, const std::string& code, const std::string& message,
                        const std::string& field = "", const boost::json::object& extra = {});
// Maps a dlock::Error (or anything else) to its status, code and Retry-After.
Response error_response(const std::exception_ptr& error);

}  // namespace dlock::server
