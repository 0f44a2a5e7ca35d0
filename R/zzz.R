.onUnload <- function(libpath) {
  library.dynam.unload("sysbioGPU", libpath)
}
