package tenanttest

import "time"

// RequestTimeout is the deadline of every request of the cases, as the transport's server
// takes it: the admission endpoint's ?timeout=1s, a plugin server's RequestTimeout or the
// deadline of the gRPC call: 1 s, raceFactor (30) times that under the race detector. The cases
// on 1 MB objects require the answer within it, and an answer not ready by the deadline is not
// given (504 / DeadlineExceeded, reads too). The detector makes the work on a 1 MB object
// several times slower (the verified undo of the size-limit case takes about 0.17 s, 1.1–1.4 s
// with -race) and make test runs it beside other packages on 2 cores (up to 4.4 s for a
// case's requests measured with the load at 4), hence the factor. No case waits for the
// deadline to pass, so the factor costs nothing when they are green.
const RequestTimeout = raceFactor * time.Second

// CallTimeout is how long a Mutator waits for an answer: twice RequestTimeout, so that the
// caller sees what the server did at its deadline.
const CallTimeout = 2 * RequestTimeout
