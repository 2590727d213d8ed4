// Guest lives in Good.cpp.
