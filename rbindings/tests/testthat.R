library(testthat)
library(rfuse)

test_check("rfuse")
