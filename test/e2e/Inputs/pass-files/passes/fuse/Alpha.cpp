// alpha
