#include "loom/ops/registry.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "loom/ops/ops.h"

namespace loom {
namespace {

TEST(OpRegistry, FindsEveryOpByItsName) {
  std::set<std::string> names;
  for (const OpDef* op : all_ops()) {
    EXPECT_EQ(&find_op(op->name()), op);
    EXPECT_TRUE(names.insert(op->name()).second) << "two ops named " << op->name();
  }
  EXPECT_GE(names.size(), 32u);
  // The ops the graph API builds are the registered ones.
  Variable x = input_variable({3});
  EXPECT_EQ(&find_op("Plus"), &plus(x, x).op());
  EXPECT_EQ(&find_op("Times"), &times(x, parameter(NDShape{3, 2})).op());
  EXPECT_EQ(&find_op("SequenceLast"), &sequence::last(sequence::input_variable({3})).op());
  EXPECT_EQ(&find_op("Splice"), &splice({x, x}).op());
}

TEST(OpRegistry, UnknownNamesAreArgumentErrors) {
  try {
    find_op("Frobnicate");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op 'Frobnicate'"), std::string::npos);
  }
  EXPECT_THROW(find_op(""), ArgumentError);
  EXPECT_THROW(find_op("plus"), ArgumentError);  // names are case-sensitive
  try {
    find_op(std::string("bad\n\x01name") + std::string(100, 'x'));
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'bad??namexxx"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("...'"), std::string::npos) << e.what();
  }
}

TEST(OpRegistry, InputCounts) {
  EXPECT_NO_THROW(check_op_input_count(find_op("Times"), 2));
  EXPECT_THROW(check_op_input_count(find_op("Times"), 1), ArgumentError);
  EXPECT_THROW(check_op_input_count(find_op("ReLU"), 0), ArgumentError);
  EXPECT_NO_THROW(check_op_input_count(find_op("Splice"), 5));
  EXPECT_THROW(check_op_input_count(find_op("Splice"), 0), ArgumentError);
  try {
    check_op_input_count(find_op("Plus"), 3);
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "Plus takes 2 input(s), not 3");
  }
}

}  // namespace
}  // namespace loom
