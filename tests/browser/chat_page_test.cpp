// The chat page (GET /) in a real browser: headless Chromium (chromium.h)
// loads it from the real `chimera serve` on stories260K, a message is typed
// and sent with Enter as a user would, and the streamed answer is read from
// the DOM. With temperature 0 it must equal what the API returns for the same
// request; the API key path (a missing or wrong key shows the 401 message),
// the Stop button (the server cancels the generation and frees the slot),
// the conversations kept in localStorage and the Content-Security-Policy are
// checked too. Skipped (with the reason) only when chromium is not installed.
#include <gtest/gtest.h>

#include <string>

#include "browser/chromium.h"
#include "server/server_fixture.h"

namespace chimera::test {
namespace {

#define REQUIRE_CHROMIUM()                                                                                   \
  if (Chromium::binary().empty())                                                                            \
  GTEST_SKIP() << "chromium not found (/usr/bin/chromium, or $CHIMERA_CHROMIUM; scripts/setup.sh installs it): " \
                  "the browser test of the chat page did not run"

std::string js(const std::string& s) { return json(s).dump(); }

// The page in one browser tab, with the actions a user takes.
class ChatPage {
 public:
  explicit ChatPage(int port) : url_("http://127.0.0.1:" + std::to_string(port) + "/") {
    b.start();
    load();
  }

  void load() {
    b.navigate(url_);
    wait_ready();
  }
  void reload() {
    b.reload();
    wait_ready();
  }

  // Sets a field as typing would (value, then input and change events).
  void set(const std::string& id, const std::string& value) {
    b.eval("(() => { const e = document.getElementById(" + js(id) + "); e.value = " + js(value) +
           "; e.dispatchEvent(new Event('input', {bubbles: true}));"
           " e.dispatchEvent(new Event('change', {bubbles: true})); })()");
  }
  void click(const std::string& selector) { b.eval("document.querySelector(" + js(selector) + ").click()"); }

  // Types `text` into the message box and presses Enter; returns once the
  // reply ended (<= 60 s), with its outcome: done, stopped or error.
  std::string send(const std::string& text) {
    start_send(text);
    return wait_reply();
  }
  void start_send(const std::string& text) {
    replies_before_ = replies();
    b.eval("document.getElementById('input').focus()");
    b.insert_text(text);
    b.press_enter();
  }
  std::string wait_reply() {
    if (!b.wait_for("Number(document.body.dataset.replies || 0) > " + std::to_string(replies_before_), 60))
      throw std::runtime_error("the reply did not end within 60 s; page: " + b.eval("document.body.innerText").dump());
    return b.eval("document.body.dataset.outcome").get<std::string>();
  }

  // The messages shown: role, text, child elements inside the text, stopped mark.
  json messages() {
    return b.eval(
        "[...document.querySelectorAll('#messages .msg')].map(m => ({role: m.dataset.role,"
        " text: m.querySelector('.content').textContent, elements: m.querySelector('.content').childElementCount,"
        " stopped: m.classList.contains('stopped')}))");
  }
  std::string text(const std::string& id) {
    return b.eval("document.getElementById(" + js(id) + ").textContent").get<std::string>();
  }
  std::string value(const std::string& id) {
    return b.eval("document.getElementById(" + js(id) + ").value").get<std::string>();
  }
  json conversation_titles() {
    return b.eval("[...document.querySelectorAll('#conversations li .title')].map(e => e.textContent)");
  }

  Chromium b;

 private:
  int replies() { return std::stoi(b.eval("document.body.dataset.replies || '0'").get<std::string>()); }
  void wait_ready() {
    if (!b.wait_for("document.readyState === 'complete' && document.body.dataset.state === 'idle'", 30))
      throw std::runtime_error("the page did not become ready within 30 s; chromium log:\n" + b.log());
  }
  std::string url_;
  int replies_before_ = 0;
};

// The reply of POST /v1/chat/completions (not streamed) for `messages`.
json api_chat(const ServerProcess& srv, const json& messages, int max_tokens, const std::string& key) {
  auto c = srv.client();
  const json body = {{"messages", messages}, {"temperature", 0}, {"top_p", 1}, {"max_tokens", max_tokens},
                     {"seed", 7}};
  auto r = post_json(*c, "/v1/chat/completions", body.dump(), key);
  if (!r || r->status != 200) throw std::runtime_error("API request failed: " + (r ? r->body : std::string("-")));
  return json::parse(r->body);
}

std::string dump_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(ChatPage, StreamsTheGreedyAnswerTheApiGives) {
  REQUIRE_CHROMIUM();
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "sekrit");
  ChatPage page(srv.port());  // the page itself needs no key

  // Without a key the page says so (its /v1/models call got 401).
  ASSERT_TRUE(page.b.wait_for("document.getElementById('status').textContent.includes('401')", 30))
      << page.text("status");
  EXPECT_NE(page.text("status").find("requires an API key"), std::string::npos) << page.text("status");

  page.set("api-key", "sekrit");
  page.set("system", "You tell short stories.");
  page.set("temperature", "0");
  page.set("top_p", "1");
  page.set("max_tokens", "40");
  page.set("seed", "7");
  ASSERT_TRUE(page.b.wait_for("document.getElementById('model').textContent === 'model: stories260K'", 30))
      << page.text("model");

  // Markup in the user's text stays text.
  const std::string first = "Once upon a time <b>Lily</b> <img src=x onerror=\"window.pwned=1\"> & \"Tom\"";
  ASSERT_EQ(page.send(first), "done") << page.text("status");
  json api = api_chat(srv, {{{"role", "system"}, {"content", "You tell short stories."}}, {{"role", "user"}, {"content", first}}},
                      40, "sekrit");
  const std::string answer = api["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_FALSE(answer.empty());
  json shown = page.messages();
  ASSERT_EQ(shown.size(), 2u) << shown.dump();
  EXPECT_EQ(shown[0]["role"], "user");
  EXPECT_EQ(shown[0]["text"], first);
  EXPECT_EQ(shown[0]["elements"], 0);
  EXPECT_EQ(shown[1]["role"], "assistant");
  EXPECT_EQ(shown[1]["text"], answer);
  EXPECT_EQ(shown[1]["elements"], 0);
  EXPECT_EQ(page.b.eval("document.querySelectorAll('#messages b, #messages img').length"), 0);
  EXPECT_TRUE(page.b.eval("window.pwned === undefined").get<bool>());
  // The token count shown is the server's (usage of the stream).
  EXPECT_EQ(page.b.eval("document.getElementById('stats').dataset.tokens"),
            std::to_string(api["usage"]["completion_tokens"].get<int>()));
  EXPECT_EQ(page.text("stats").rfind(std::to_string(api["usage"]["completion_tokens"].get<int>()) + " tokens in ", 0), 0u)
      << page.text("stats");
  EXPECT_NE(page.text("stats").find("tok/s"), std::string::npos) << page.text("stats");
  EXPECT_EQ(page.text("status"), "");

  // A second turn sends the whole history.
  const std::string second = "And then?";
  ASSERT_EQ(page.send(second), "done") << page.text("status");
  api = api_chat(srv,
                 {{{"role", "system"}, {"content", "You tell short stories."}},
                  {{"role", "user"}, {"content", first}},
                  {{"role", "assistant"}, {"content", answer}},
                  {{"role", "user"}, {"content", second}}},
                 40, "sekrit");
  shown = page.messages();
  ASSERT_EQ(shown.size(), 4u) << shown.dump();
  EXPECT_EQ(shown[3]["text"], api["choices"][0]["message"]["content"]);

  // Kept in the browser: a reload shows the same conversation and settings.
  page.reload();
  EXPECT_EQ(page.messages(), shown);
  EXPECT_EQ(page.value("api-key"), "sekrit");
  EXPECT_EQ(page.value("max_tokens"), "40");

  EXPECT_TRUE(page.b.page_problems().empty()) << dump_lines(page.b.page_problems());
  // The policy holds in the browser: an injected inline script, a string
  // timer (eval), an image and a fetch from elsewhere are refused — each
  // reports its violation (waited for, <= 10 s) and none runs or loads.
  const json csp = page.b.eval(R"JS(new Promise((resolve) => {
    const seen = [];
    document.addEventListener('securitypolicyviolation', (e) => seen.push(e.effectiveDirective));
    const s = document.createElement('script');
    s.textContent = 'window.inlineRan = 1';
    document.head.append(s);
    setTimeout('window.timerRan = 1', 0);
    const img = document.createElement('img');
    img.src = 'http://127.0.0.1:9/x.png';
    document.body.append(img);
    fetch('http://127.0.0.1:9/').catch(() => {});
    const t0 = Date.now();
    (function check() {
      if (seen.length >= 4 || Date.now() - t0 > 10000)
        resolve({seen: seen.sort(), inline: window.inlineRan === undefined, timer: window.timerRan === undefined});
      else setTimeout(check, 20);
    })();
  }))JS",
                               30);
  EXPECT_EQ(csp["seen"], json::array({"connect-src", "img-src", "script-src", "script-src-elem"})) << csp.dump();
  EXPECT_EQ(csp["inline"], true) << csp.dump();
  EXPECT_EQ(csp["timer"], true) << csp.dump();
}

TEST(ChatPage, WrongApiKeyShowsTheRefusal) {
  REQUIRE_CHROMIUM();
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "sekrit");
  ChatPage page(srv.port());
  page.set("api-key", "wrong");
  page.set("max_tokens", "8");
  ASSERT_EQ(page.send("Hello"), "error");
  const std::string status = page.text("status");
  EXPECT_NE(status.find("401 Unauthorized"), std::string::npos) << status;
  EXPECT_NE(status.find("refused the API key"), std::string::npos) << status;
  // Nothing was answered: no reply shown, the message is back in the box.
  json shown = page.messages();
  EXPECT_EQ(shown.size(), 0u) << shown.dump();
  EXPECT_EQ(page.value("input"), "Hello");

  // Invalid extra fields are refused by the page, naming the problem.
  page.set("api-key", "sekrit");
  page.set("extra", "{\"top_k\": ");
  page.set("input", "");
  ASSERT_EQ(page.send("Hello"), "error");
  EXPECT_NE(page.text("status").find("not valid JSON"), std::string::npos) << page.text("status");
  page.set("extra", "{\"top_k\": 1}");
  page.set("input", "");
  ASSERT_EQ(page.send("Hello"), "done") << page.text("status");
  EXPECT_EQ(page.messages().size(), 2u);
  EXPECT_TRUE(page.b.page_problems().empty()) << dump_lines(page.b.page_problems());
}

TEST(ChatPage, StopCancelsTheGenerationOnTheServer) {
  REQUIRE_CHROMIUM();
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "16384", "--parallel", "1");
  ChatPage page(srv.port());
  page.set("temperature", "0");
  page.set("max_tokens", "16000");
  page.set("extra", "{\"ignore_eos\": true}");
  page.start_send("Once upon a time");
  // Stop once the answer is streaming.
  ASSERT_TRUE(page.b.wait_for(
      "document.body.dataset.state === 'streaming' &&"
      " document.querySelector('#messages .msg.assistant .content').textContent.length > 0", 60))
      << page.b.eval("document.body.innerText").dump();
  page.click("#stop");
  ASSERT_EQ(page.wait_reply(), "stopped");
  json shown = page.messages();
  ASSERT_EQ(shown.size(), 2u) << shown.dump();
  EXPECT_EQ(shown[1]["stopped"], true);
  EXPECT_FALSE(shown[1]["text"].get<std::string>().empty());
  // No usage for a stopped reply: the page counts chunks and says so.
  EXPECT_EQ(page.text("stats").rfind("\u2248", 0), 0u) << page.text("stats");

  // The server saw the closed connection: the request ends as cancelled and the slot is free.
  double running = -1, cancelled = -1;
  for (int i = 0; i < 200; ++i) {  // <= 10 s
    const std::string m = get_metrics(srv);
    running = metric(m, "chimera_requests_running");
    cancelled = metric(m, "chimera_requests_total{finish_reason=\"cancelled\"}");
    if (running == 0 && cancelled >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(cancelled, 1);
  // The only slot serves the page's next message.
  page.set("max_tokens", "8");
  page.set("extra", "");
  ASSERT_EQ(page.send("The end"), "done") << page.text("status");
  EXPECT_EQ(page.messages().size(), 4u);
  EXPECT_TRUE(page.b.page_problems().empty()) << dump_lines(page.b.page_problems());
}

TEST(ChatPage, ConversationsAreKeptInTheBrowser) {
  REQUIRE_CHROMIUM();
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  ChatPage page(srv.port());
  page.set("max_tokens", "4");
  ASSERT_EQ(page.send("First chat"), "done") << page.text("status");
  page.click("#new-chat");
  EXPECT_EQ(page.messages().size(), 0u);
  ASSERT_EQ(page.send("Second chat"), "done") << page.text("status");
  EXPECT_EQ(page.conversation_titles(), json::array({"Second chat", "First chat"}));

  page.reload();
  EXPECT_EQ(page.conversation_titles(), json::array({"Second chat", "First chat"}));
  json shown = page.messages();
  ASSERT_EQ(shown.size(), 2u) << shown.dump();
  EXPECT_EQ(shown[0]["text"], "Second chat");
  page.click("#conversations li:nth-child(2) .title");
  shown = page.messages();
  ASSERT_EQ(shown.size(), 2u) << shown.dump();
  EXPECT_EQ(shown[0]["text"], "First chat");

  page.click("#conversations li:nth-child(2) .delete");
  EXPECT_EQ(page.conversation_titles(), json::array({"Second chat"}));
  page.reload();
  EXPECT_EQ(page.conversation_titles(), json::array({"Second chat"}));
  EXPECT_TRUE(page.b.page_problems().empty()) << dump_lines(page.b.page_problems());
}

}  // namespace
}  // namespace chimera::test
