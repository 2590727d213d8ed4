inline constexpr const char *kFuseAlpha = "alpha";
inline constexpr const char *kFuseDelta = "delta";
inline constexpr const char *kFuseEps = "epsilon";
