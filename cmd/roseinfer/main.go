// Command roseinfer is the GPT-2 inference engine: an OpenAI-compatible
// server (serve), a one-shot generator (generate), a random-weight
// checkpoint writer (init-model) and version.
//
// main only wires: signals cancel a context, and each subcommand (one file
// each) parses its flags into an options struct and calls one function.
// Flags and their mapping to the original rosellm server are documented in
// docs/roseinfer-flags.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal a second one gets the default action (exit at
	// once) while the first drains.
	go func() { <-ctx.Done(); stop() }()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "roseinfer:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "roseinfer",
		Short: "GPT-2 inference engine with an OpenAI-compatible streaming server",
		Long: `roseinfer runs GPT-2 models (HF checkpoint directories or a built-in tiny model)
on the CPU, on an NVIDIA GPU, or on a simulated device, behind an OpenAI-compatible API.

  roseinfer serve                                   # built-in tiny model, CPU, 127.0.0.1:8000
  roseinfer serve --model ./gpt2-dir --port 9000    # an HF GPT-2 checkpoint directory
  roseinfer init-model --preset gpt2 --seed 1 --dtype fp16 --out ./gpt2-random
  roseinfer generate --prompt "Hello" --max-tokens 32`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newGenerateCommand(), newInitModelCommand(), newVersionCommand())
	return root
}
