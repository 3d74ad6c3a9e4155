// best_of (server-side ranking of several samples) is refused with a 400
// naming it, on both endpoints; best_of 1 (the default) is accepted.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace chimera::test {
namespace {

TEST(BestOf, RefusedNamingIt) {
  CHIMERA_REQUIRE_SHARED(shared);
  ServerProcess srv;
  std::string err;
  ASSERT_TRUE(srv.start(model_path(shared), {}, &err)) << err;
  auto c = srv.client();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  const json cmpl = {{"prompt", "Hi"}, {"max_tokens", 2}};
  for (const auto& [path, base] : std::vector<std::pair<std::string, json>>{{"/v1/completions", cmpl},
                                                                           {"/v1/chat/completions", chat}}) {
    for (const json& v : {json(2), json("3")}) {
      json b = base;
      b["best_of"] = v;
      auto r = post_json(*c, path, b.dump());
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 400) << r->body;
      json j = json::parse(r->body, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << r->body;
      EXPECT_EQ(j["error"]["param"], "best_of") << r->body;
      EXPECT_EQ(j["error"]["code"], "unsupported_parameter") << r->body;
    }
    json ok = base;
    ok["best_of"] = 1;
    auto r = post_json(*c, path, ok.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
}

}  // namespace
}  // namespace chimera::test
