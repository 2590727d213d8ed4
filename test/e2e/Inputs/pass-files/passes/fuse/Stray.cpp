// no fusion
