// Package lambda simulates the Lambda Cloud API for the cloud simulator
// (e2e/cloudsim): the calls hoist's lambda driver makes
// (https://docs.lambda.ai/api/cloud): GET /instance-types with each type's
// regions_with_capacity_available, GET /instances and /instances/{id},
// POST /instance-operations/launch and /instance-operations/terminate, and
// GET, POST and DELETE /ssh-keys, under /api/v1.
//
// Requests carry the API key as "Authorization: Bearer <key>". Responses
// are {"data": ...}; errors are
// {"error":{"code","message","suggestion"}} with Lambda's codes:
// global/invalid-api-key (401), global/object-does-not-exist (404),
// global/invalid-parameters (400), global/quota-exceeded (400),
// instance-operations/launch/insufficient-capacity (400) and, for the
// injected error rate, HTTP 429 global/rate-limited. A launched instance is
// a simulated VM (hoist/e2e/cloudsim/sim) whose sshd accepts the launch's
// SSH key for the image's user: ubuntu for Lambda's default image, root for
// the simulator's own image family cloudsim-root (Lambda has no user data).
//
// It is test support: only e2e/cloudsim and tests import it.
package lambda
