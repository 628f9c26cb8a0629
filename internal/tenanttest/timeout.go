package tenanttest

import "time"

// RequestTimeout is the deadline of every request of the cases, as the transport's server
// takes it: the admission endpoint's ?timeout=1s, a plugin server's RequestTimeout or the
// deadline of the gRPC call. The cases on 1 MB objects require the answer within it.
const RequestTimeout = time.Second

// CallTimeout is how long a Mutator waits for an answer: RequestTimeout, or raceFactor times
// that under the race detector. The detector makes the work on a 1 MB object several times
// slower (the verified undo of the size-limit case takes about 0.17 s, 1.1–1.4 s with -race),
// so there a server that stops at its RequestTimeout answers after it; the caller must wait
// for that answer to see what the server did at its deadline.
const CallTimeout = raceFactor * RequestTimeout
