// Package docs holds the project's documents; its tests hold their links
// to the tree, their TOML examples to the config checker, and their words to
// what a user can follow (Unfit, which cmd/trestle's tests hold --help and
// the man pages to as well).
package docs

import "regexp"

// Unfit is what no user-facing text (README, docs/, --help, the man pages)
// may say: a tracker's numbers ("issue 29"), the seed reports by number or
// file ("seed 003", "003_3e6f4237fce17ad8.txt"), or a path of one machine
// (its home directories, a work tree under /work). Say which feature or
// release, name the published report, and give a command anyone can run.
var Unfit = regexp.MustCompile(`(?i)\b(?:issues?|PR|pull request)s? #?[0-9]+\b|(?:^|\s)#[0-9]+\b|\bseeds? #?[0-9]{3}\b|\(seed\b|\b[0-9]{3}_[0-9a-f]{16}\.txt\b|(?:^|[\s"'(=:` + "`" + `])/(?:work|root|home)/`)
