#pragma once

// A raw TCP client to a dlockd on loopback for the HTTP-level tests: exact bytes out, whatever
// comes back, and a close by FIN or by reset under the test's control.

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace dlock::testing {

// A raw TCP client: exact bytes out, whatever comes back.
class RawSocket {
 public:
  explicit RawSocket(const std::string& address, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in peer{};
    peer.sin_family = AF_INET;
    peer.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect failed");
    }
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  ~RawSocket() { close(); }

  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Reads until `until` appears, the peer closes, or the receive timeout; returns what came.
  std::string receive(const std::string& until = "") {
    std::string text;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        closed_ = n == 0 || errno == ECONNRESET;
        return text;
      }
      text.append(chunk, static_cast<std::size_t>(n));
      if (!until.empty() && text.find(until) != std::string::npos) return text;
    }
  }
  // One complete answer with a Content-Length body (what dlockd sends).
  std::string exchange(const std::string& request) {
    send(request);
    std::string text = receive("\r\n\r\n");
    const auto end = text.find("\r\n\r\n");
    if (end == std::string::npos) return text;
    const auto length_at = text.find("Content-Length: ");
    std::size_t length = 0;
    if (length_at != std::string::npos && length_at < end) {
      length = std::stoul(text.substr(length_at + 16));
    }
    while (text.size() < end + 4 + length && !closed_) text += receive();
    return text;
  }
  bool closed() const { return closed_; }
  void set_receive_timeout(std::chrono::milliseconds timeout) {
    timeval value{0, static_cast<suseconds_t>(timeout.count() * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &value, sizeof(value));
  }
  // Closes with a FIN; reset() closes with a reset (SO_LINGER 0).
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void reset() {
    const linger abort{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    close();
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

}  // namespace dlock::testing
