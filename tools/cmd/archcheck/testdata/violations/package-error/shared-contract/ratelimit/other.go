// Load error: a second package name in the directory, so go list cannot
// read the package (and its imports would be unknown).
package other
