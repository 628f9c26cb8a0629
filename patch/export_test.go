package patch

// Guard is guard, for the tests of the patch package.
var Guard = guard
