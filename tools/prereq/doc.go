// Package prereq owns ensure.sh, the script that make test, make demo and
// make bench run first so that a fresh machine has the programs they need
// (redis-server, redis-sentinel, redis-cli): it installs them with apt-get
// when it runs as root, and otherwise stops at once with one line naming what
// to install. The package has no Go code of its own; its test drives the
// script against stub programs. It must never import any project module.
package prereq
