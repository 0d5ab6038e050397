package pgembed

// FindBinaries exposes the binary search to the external tests.
var FindBinaries = findBinaries
