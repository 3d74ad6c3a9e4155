// format/gguf/tensor_names.h: the name patterns turned into layer names.
#include <gtest/gtest.h>

#include "format/gguf/tensor_names.h"

namespace chimera::format::tn {
namespace {

TEST(TensorNames, PatternsBecomeLayerNames) {
  EXPECT_EQ(at(kAttnQ, 12), "blk.12.attn_q.weight");
  EXPECT_EQ(at(kOutput, 3), "output.weight");  // a whole-model name is returned as is
  EXPECT_EQ(layer_prefix(0), "blk.0");
  EXPECT_EQ(layer_of("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(layer_of("output.weight"), -1);
  EXPECT_EQ(layer_of("blk.x.attn_q.weight"), -1);
}

// The layer binders' names: in() the whole name under a layer prefix,
// linear() its stem without ".weight" (bind_linear appends ".weight" /
// ".bias"); names without ".weight" (ssm_a) are the same either way.
TEST(TensorNames, InAndLinearNameALayersTensors) {
  EXPECT_EQ(in("blk.3", kSsmA), "blk.3.ssm_a");
  EXPECT_EQ(linear("blk.3", kSsmA), "blk.3.ssm_a");
  EXPECT_EQ(in("blk.3", kAttnQ), "blk.3.attn_q.weight");
  EXPECT_EQ(linear("blk.3", kAttnQ), "blk.3.attn_q");
  EXPECT_EQ(linear("blk.17", kFfnDownShexp), "blk.17.ffn_down_shexp");
  EXPECT_EQ(in(layer_prefix(5), kAttnLambdaQ1), at(kAttnLambdaQ1, 5));
  EXPECT_EQ(linear(layer_prefix(5), kSsmOut) + ".weight", at(kSsmOut, 5));
}

}  // namespace
}  // namespace chimera::format::tn
