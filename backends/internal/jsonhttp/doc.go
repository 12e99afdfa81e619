// Package jsonhttp sends one JSON request over HTTP for the drivers whose
// provider has no Go SDK (lambda, verda, vastai: REST; runpod: GraphQL):
// the body, the bearer token, the headers, the bounded read of the answer.
// Each driver decodes the answer and classifies its errors itself.
//
// Only those drivers import it; it imports nothing of hoist's.
package jsonhttp
