package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/roseinfer/roseinfer/engine/launch"
	"github.com/roseinfer/roseinfer/engine/model"
	"github.com/roseinfer/roseinfer/engine/model/qwen3"
)

// initModelOptions are the flags of `roseinfer init-model`.
type initModelOptions struct {
	preset string
	seed   uint64
	dtype  string
	out    string
}

func newInitModelCommand() *cobra.Command {
	o := initModelOptions{preset: "tiny"}
	cmd := &cobra.Command{
		Use:   "init-model",
		Short: "Write an HF checkpoint directory with deterministic random weights",
		Long: `init-model writes config.json, model.safetensors and the model family's
tokenizer files (for GPT-2: vocab.json, merges.txt, ...; for Qwen3:
tokenizer.json, tokenizer_config.json and generation_config.json) into --out.
The weights are a pure function of (preset, seed), so the same command gives
the same checkpoint anywhere, and transformers' from_pretrained loads it
(GPT2LMHeadModel for the GPT-2 presets, Qwen3ForCausalLM for the Qwen3 ones).

  roseinfer init-model --preset gpt2 --seed 1 --dtype fp16 --out ./gpt2-random
  roseinfer init-model --preset tiny --out ./tiny   # the model serve runs without --model
  roseinfer init-model --preset qwen3-0.6b --out ./qwen3-0.6b-random   # bf16, as Qwen/Qwen3-0.6B`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInitModel(o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.preset, "preset", o.preset, fmt.Sprintf("model shape: %v", model.PresetNames()))
	fs.Uint64Var(&o.seed, "seed", o.seed, "weights seed")
	fs.StringVar(&o.dtype, "dtype", o.dtype, "weights dtype in model.safetensors: fp32, fp16 or bf16 (default: bf16 for Qwen3 presets, fp32 otherwise)")
	fs.StringVar(&o.out, "out", o.out, "output directory (created if missing; files in it are replaced)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runInitModel(o initModelOptions, out io.Writer) error {
	cfg, err := model.Preset(o.preset)
	if err != nil {
		return err
	}
	if o.dtype == "" {
		o.dtype = "fp32"
		if cfg.Family == qwen3.Family.Name {
			o.dtype = "bf16" // as Qwen's checkpoints ship
		}
	}
	dtype, err := model.ParseDType(o.dtype)
	if err != nil {
		return err
	}
	if o.out == "" {
		return fmt.Errorf("--out must not be empty")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.out, err)
	}
	w, err := model.InitRandom(cfg, o.seed)
	if err != nil {
		return err
	}
	if err := model.WriteCheckpoint(o.out, cfg, w, dtype); err != nil {
		return err
	}
	if err := launch.WriteModelFiles(o.out, cfg); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "wrote %s: preset %s, seed %d, %s, %d parameters\n", o.out, o.preset, o.seed, dtype,
		cfg.NumParameters())
	return err
}
