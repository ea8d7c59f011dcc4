//go:build !unix

package main

import "time"

// processCPU is not measured here: coord bench reports 0.
func processCPU() time.Duration { return 0 }
