// A helper outside passes/lib/.
