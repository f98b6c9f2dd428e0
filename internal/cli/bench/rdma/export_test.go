package rdma

// StartCPUProfile is startCPUProfile for the external tests.
var StartCPUProfile = startCPUProfile
