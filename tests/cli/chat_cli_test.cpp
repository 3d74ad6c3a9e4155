// `chimera chat` end to end with piped input: two turns, the second feeds only
// the new turn's tokens (the state is kept; earlier turns are not prefilled
// again), and the process exits cleanly at end of input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <regex>
#include <string>

#include "test_util.h"

namespace chimera::test {
namespace {

TEST(ChatCli, SecondTurnFeedsOnlyNewTokens) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string in = temp_path("chat-in.txt"), err = temp_path("chat-err.txt"), out = temp_path("chat-out.txt");
  {
    FILE* f = std::fopen(in.c_str(), "w");
    std::fputs("Once upon a time there was a cat.\nThe cat was happy.\n", f);
    std::fclose(f);
  }
  const std::string cmd = chimera_binary() + " chat -m " + shared + "/models/stories260K.gguf --temp 0 -n 12 -v < " +
                          in + " > " + out + " 2> " + err;
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto e = read_file_bytes(err);
  const std::string log(e.begin(), e.end());
  std::regex re("\\[feeding ([0-9]+) new tokens\\]");
  std::vector<int> fed;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it)
    fed.push_back(std::stoi((*it)[1]));
  ASSERT_EQ(fed.size(), 2u) << log;
  // Turn 2 holds the second user line plus template glue, far fewer tokens than
  // the whole conversation (turn 1 prompt + 12 reply tokens + turn 2).
  EXPECT_GT(fed[1], 3);
  EXPECT_LT(fed[1], fed[0] + 12);
  auto o = read_file_bytes(out);
  EXPECT_GT(o.size(), 0u);
}

}  // namespace
}  // namespace chimera::test
