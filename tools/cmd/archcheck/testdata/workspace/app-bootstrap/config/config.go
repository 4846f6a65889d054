// Package config is a fixture package of the composition root.
package config
