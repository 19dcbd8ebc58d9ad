package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/engine"
	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/sample"
)

// generateOptions are the flags of `roseinfer generate`.
type generateOptions struct {
	engineOptions
	prompt      string
	maxTokens   int
	temperature float64
	topK        int
	topP        float64
	seed        uint64
	hasSeed     bool
	ignoreEOS   bool
	verbose     bool
}

func newGenerateCommand() *cobra.Command {
	o := generateOptions{engineOptions: defaultEngineOptions(), maxTokens: 32, temperature: 1, topK: -1, topP: 1}
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate one completion in this process and stream it to stdout",
		Long: `generate runs the engine in this process (no server) on one prompt and writes the
prompt's continuation to stdout as it is produced.

  roseinfer generate --prompt "Hello" --max-tokens 32
  roseinfer generate --model ./gpt2 --prompt "The capital of France is" --temperature 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.hasSeed = cmd.Flags().Changed("seed")
			return runGenerate(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs)
	fs.StringVar(&o.prompt, "prompt", o.prompt, "the prompt (required)")
	fs.IntVar(&o.maxTokens, "max-tokens", o.maxTokens, "tokens to generate at most")
	fs.Float64Var(&o.temperature, "temperature", o.temperature, "sampling temperature (0 = greedy)")
	fs.IntVar(&o.topK, "top-k", o.topK, "keep the k most likely tokens (-1 or 0 = off)")
	fs.Float64Var(&o.topP, "top-p", o.topP, "keep the smallest set of tokens with this probability mass (1 = off)")
	fs.Uint64Var(&o.seed, "seed", o.seed, "sampling seed (default: random)")
	fs.BoolVar(&o.ignoreEOS, "ignore-eos", o.ignoreEOS, "keep generating after <|endoftext|>")
	fs.BoolVar(&o.verbose, "verbose", o.verbose, "log model loading to stderr")
	_ = cmd.MarkFlagRequired("prompt")
	return cmd
}

func runGenerate(ctx context.Context, o generateOptions, out, logOut io.Writer) error {
	switch {
	case o.prompt == "":
		return errors.New("--prompt must not be empty")
	case o.maxTokens < 1:
		return fmt.Errorf("--max-tokens must be at least 1, got %d", o.maxTokens)
	case o.temperature < 0:
		return fmt.Errorf("--temperature must not be negative, got %g", o.temperature)
	case !(o.topP > 0 && o.topP <= 1):
		return fmt.Errorf("--top-p must be in (0, 1], got %g", o.topP)
	case o.topK < -1:
		return fmt.Errorf("--top-k must be -1, 0 or positive, got %d", o.topK)
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	info, err := launch.Resolve(o.launchOptions(), log)
	if err != nil {
		return err
	}
	prompt := info.Tokenizer.Encode(o.prompt)
	if len(prompt)+o.maxTokens > info.Model.MaxSeqLen {
		return fmt.Errorf("%d prompt tokens + %d max tokens exceed the context of %d", len(prompt), o.maxTokens, info.Model.MaxSeqLen)
	}
	running, err := info.Start(log)
	if err != nil {
		return err
	}
	eng := running.Engine
	defer eng.Close()
	st, err := eng.Submit(&engine.Request{
		PromptTokens: prompt,
		Params:       sample.Params{Temperature: float32(o.temperature), TopK: o.topK, TopP: float32(o.topP), Seed: o.seed},
		HasSeed:      o.hasSeed,
		MaxTokens:    o.maxTokens,
		IgnoreEOS:    o.ignoreEOS,
	})
	if err != nil {
		return err
	}
	detok := info.Tokenizer.NewDetokenizer()
	eos := info.Tokenizer.EOS()
	for {
		select {
		case <-ctx.Done():
			st.Abort()
			return ctx.Err()
		case ev, open := <-st.Outputs():
			if !open {
				_, err := io.WriteString(out, detok.Flush()+"\n")
				return err
			}
			if ev.Token >= 0 && ev.Token != eos {
				if _, err := io.WriteString(out, detok.Add(ev.Token)); err != nil {
					st.Abort()
					return err
				}
			}
			if ev.Finished == engine.FinishError {
				return errors.New("the device failed while generating")
			}
		}
	}
}
