// KvCache's per-layer fill lengths: layers advance together, or in groups for in-decoder pruning.
#include <gtest/gtest.h>

#include "era/error.h"
#include "model/kv_cache.h"

namespace era {
namespace {

TextSpec spec() {
  TextSpec s;
  s.num_layers = 4;
  s.num_kv_heads = 2;
  s.head_dim = 8;
  s.cache_head_dim = 16;
  return s;
}

TEST(KvCache, LayerGroupsAdvanceSeparately) {
  KvCache cache(spec(), 1, 10, torch::kFloat, torch::kCPU);
  const int64_t per_slot_layer = 2 * 2 * 16 * 4;  // K and V, 2 heads, 16 wide, float32
  cache.advance(3);
  EXPECT_TRUE(cache.uniform());
  EXPECT_EQ(cache.bytes_used(), 4 * 3 * per_slot_layer);
  cache.advance_layers(0, 2, 5);  // layers 0-1: 8 slots, layers 2-3: 3
  cache.advance_layers(2, 4, 1);
  EXPECT_FALSE(cache.uniform());
  EXPECT_EQ(cache.layer_length(1), 8);
  EXPECT_EQ(cache.layer_length(2), 4);
  EXPECT_EQ(cache.length(), 8);
  EXPECT_EQ(cache.bytes_used(), (2 * 8 + 2 * 4) * per_slot_layer);
  EXPECT_THROW(cache.advance(1), Error);               // the groups differ: no uniform step
  EXPECT_THROW(cache.advance_layers(1, 3, 1), Error);  // a range across both groups
  EXPECT_THROW(cache.advance_layers(0, 2, 3), Error);  // overflow
  cache.reset();
  EXPECT_TRUE(cache.uniform());
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace era
