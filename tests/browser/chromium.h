// A headless Chromium for the browser tests, driven with the Chrome DevTools
// Protocol over --remote-debugging-pipe (the browser reads NUL-terminated JSON
// commands on fd 3 and writes replies and events on fd 4): no port, no
// websocket, no third-party package.
//
// Every wait is bounded (a command that gets no reply in time throws), and the
// browser runs in its own process group with a throw-away profile: the
// destructor closes it (Browser.close), SIGKILLs the whole group and removes
// the profile on every path, a failed assertion or an exception included.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace chimera::test {

class Chromium {
 public:
  using json = nlohmann::json;

  // $CHIMERA_CHROMIUM, else /usr/bin/chromium; "" when it is not an executable.
  static std::string binary() {
    const char* e = std::getenv("CHIMERA_CHROMIUM");
    std::string path = e && *e ? e : "/usr/bin/chromium";
    return ::access(path.c_str(), X_OK) == 0 ? path : std::string();
  }

  Chromium() = default;
  Chromium(const Chromium&) = delete;
  Chromium& operator=(const Chromium&) = delete;
  ~Chromium() { close(); }

  // Starts the browser and opens one page (a tab) attached in flattened mode,
  // with the Runtime and Log domains on (exceptions and console messages are
  // collected). Throws on failure, with the browser's log.
  void start() {
    ::signal(SIGPIPE, SIG_IGN);  // a browser that died must not kill the test on write
    profile_ = temp_path("chromium-profile-" + std::to_string(counter()++));
    std::filesystem::remove_all(profile_);
    std::filesystem::create_directories(profile_);
    const std::string log = profile_ + "/chromium.log";
    int to_browser[2], from_browser[2];
    if (::pipe2(to_browser, O_CLOEXEC) != 0 || ::pipe2(from_browser, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    std::vector<std::string> argv = {binary(),
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-extensions",
                                     "--disable-sync",
                                     "--disable-crash-reporter",
                                     "--no-first-run",
                                     "--no-default-browser-check",
                                     "--mute-audio",
                                     "--user-data-dir=" + profile_,
                                     "--remote-debugging-pipe",
                                     "about:blank"};
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      // fds 3 and 4 may be taken by the pipe ends themselves: move them above first.
      const int in = ::fcntl(to_browser[0], F_DUPFD, 10), out = ::fcntl(from_browser[1], F_DUPFD, 10);
      ::dup2(in, 3);  // dup2 clears close-on-exec
      ::dup2(out, 4);
      const int logfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (logfd >= 0) {
        ::dup2(logfd, 1);
        ::dup2(logfd, 2);
      }
      // Everything the browser writes (crash database, caches) stays in the throw-away profile.
      ::setenv("HOME", profile_.c_str(), 1);
      ::setenv("XDG_CONFIG_HOME", profile_.c_str(), 1);
      ::setenv("XDG_CACHE_HOME", profile_.c_str(), 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here: no race with the child's own call
    ::close(to_browser[0]);
    ::close(from_browser[1]);
    out_ = to_browser[1];
    in_ = from_browser[0];
    // The first reply can take a while on a loaded machine.
    const json target = call("Target.createTarget", {{"url", "about:blank"}}, "", 60);
    const json attached =
        call("Target.attachToTarget", {{"targetId", target.at("targetId")}, {"flatten", true}});
    session_ = attached.at("sessionId").get<std::string>();
    call("Runtime.enable", json::object(), session_);
    call("Log.enable", json::object(), session_);
  }

  // Sends a command and waits (<= timeout_s) for its reply; returns its
  // "result". Throws on a protocol error or a timeout.
  json call(const std::string& method, const json& params, const std::string& session = "", double timeout_s = 20) {
    const int id = next_id_++;
    json msg = {{"id", id}, {"method", method}, {"params", params}};
    if (!session.empty()) msg["sessionId"] = session;
    const std::string bytes = msg.dump() + '\0';
    for (size_t off = 0; off < bytes.size();) {
      const ssize_t k = ::write(out_, bytes.data() + off, bytes.size() - off);
      if (k <= 0) throw std::runtime_error("chromium is gone (write failed); log:\n" + log());
      off += (size_t)k;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds((int64_t)(timeout_s * 1000));
    for (;;) {
      size_t nul;
      while ((nul = buf_.find('\0')) != std::string::npos) {
        json reply = json::parse(buf_.substr(0, nul), nullptr, false);
        buf_.erase(0, nul + 1);
        if (reply.is_discarded()) continue;
        if (!reply.contains("id")) {
          events_.push_back(std::move(reply));
          continue;
        }
        if (reply["id"] != id) continue;
        if (reply.contains("error"))
          throw std::runtime_error("CDP " + method + " failed: " + reply["error"].dump());
        return reply.value("result", json::object());
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw std::runtime_error("CDP " + method + ": no reply within the time limit");
      pollfd p{in_, POLLIN, 0};
      if (::poll(&p, 1, (int)left.count()) <= 0) continue;
      char chunk[65536];
      const ssize_t k = ::read(in_, chunk, sizeof chunk);
      if (k <= 0) throw std::runtime_error("chromium closed its pipe; log:\n" + log());
      buf_.append(chunk, (size_t)k);
    }
  }

  // Evaluates a JavaScript expression in the page (promises awaited) and
  // returns its value. Throws when it throws.
  json eval(const std::string& expression, double timeout_s = 20) {
    const json r = call("Runtime.evaluate",
                        {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, session_,
                        timeout_s);
    if (r.contains("exceptionDetails"))
      throw std::runtime_error("JavaScript threw: " + r["exceptionDetails"].dump() + "\nin: " + expression);
    return r.at("result").value("value", json());
  }

  // Polls `condition` (a JavaScript expression) until it is true; false after
  // timeout_s. Evaluation errors (e.g. while a navigation replaces the page) count as false.
  bool wait_for(const std::string& condition, double timeout_s = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds((int64_t)(timeout_s * 1000));
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (eval("!!(" + condition + ")", 10) == true) return true;
      } catch (const std::runtime_error&) {
        if (!alive()) throw;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void navigate(const std::string& url) { call("Page.navigate", {{"url", url}}, session_); }
  void reload() { call("Page.reload", json::object(), session_); }

  // Types text into the focused element and presses keys as a user would.
  void insert_text(const std::string& text) { call("Input.insertText", {{"text", text}}, session_); }
  void press_enter() {
    for (const char* type : {"keyDown", "keyUp"})
      call("Input.dispatchKeyEvent",
           {{"type", type}, {"key", "Enter"}, {"code", "Enter"}, {"windowsVirtualKeyCode", 13}, {"text", "\r"}},
           session_);
  }

  // Uncaught exceptions, and console messages that report a Content-Security-
  // Policy violation, since start (one line each).
  std::vector<std::string> page_problems() const {
    std::vector<std::string> out;
    for (const auto& e : events_) {
      const std::string m = e.value("method", "");
      if (m == "Runtime.exceptionThrown") out.push_back("exception: " + e["params"].dump());
      if (m == "Log.entryAdded") {
        const std::string text = e["params"]["entry"].value("text", "");
        if (text.find("Content Security Policy") != std::string::npos) out.push_back("CSP: " + text);
      }
      if (m == "Runtime.consoleAPICalled" && e["params"].value("type", "") == "error")
        out.push_back("console.error: " + e["params"].dump());
    }
    return out;
  }

  bool alive() const {
    if (pid_ <= 0) return false;
    siginfo_t info{};
    return ::waitid(P_PID, (id_t)pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  }

  std::string log() const {
    std::ifstream f(profile_ + "/chromium.log");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
  }

  // Closes the browser: Browser.close (<= 3 s to exit), then SIGKILL to its
  // whole process group (renderers included), reap, remove the profile.
  void close() {
    if (pid_ > 0) {
      if (out_ >= 0) {
        try {
          call("Browser.close", json::object(), "", 3);
        } catch (const std::exception&) {
        }
      }
      siginfo_t info{};
      for (int i = 0; i < 150; ++i) {  // <= 3 s; WNOWAIT keeps the group id ours until we reap
        info.si_pid = 0;
        if (::waitid(P_PID, (id_t)pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (out_ >= 0) ::close(out_);
    if (in_ >= 0) ::close(in_);
    out_ = in_ = -1;
    if (!profile_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(profile_, ec);
      profile_.clear();
    }
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  int out_ = -1, in_ = -1;
  int next_id_ = 1;
  std::string buf_, session_, profile_;
  std::vector<json> events_;
};

}  // namespace chimera::test
