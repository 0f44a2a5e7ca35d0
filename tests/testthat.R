library(testthat)
library(sysbioGPU)

test_check("sysbioGPU")
