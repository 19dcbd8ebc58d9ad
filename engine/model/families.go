package model

// The families this build knows: each registers itself with arch when its
// package initialises. Adding a family is one import here (and its package;
// see arch's package doc).
import (
	_ "github.com/roseinfer/roseinfer/engine/model/gpt2"
	_ "github.com/roseinfer/roseinfer/engine/model/qwen3"
)
