// Package forge holds test fakes of GitHub's and GitLab's REST APIs on
// loopback, close enough to the real ones for their official Go clients
// (github.com/google/go-github and gitlab.com/gitlab-org/api/client-go):
// commit statuses, pull request comments and merge request notes, with
// the JSON shapes of the APIs' documentation. They record what was posted
// for a test's assertions. They are test support; nothing in hoist imports
// them.
package forge
