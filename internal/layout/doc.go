// Package layout holds, as tests, the rules of the repository's layout that
// no compiler checks: public packages do not import internal ones, and no
// function, test functions and their helpers included, grows past what a
// reader takes in at once unless its comment says why. It has no code of
// its own.
package layout
