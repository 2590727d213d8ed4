// Good and, wrongly, Guest.
#define GEN_PASS_DEF_GOOD
#define GEN_PASS_DEF_GUEST
