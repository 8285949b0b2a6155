defmodule Emily.ServingModels do
  @moduledoc false
  # The servings of the distributed serving test and bench, built from what
  # the repository holds (no network, no files outside it): this file is
  # required on the test node and on every peer node, so each node builds
  # the same servings under the same names.
  #
  #   * embedding: Bumblebee's text_embedding serving on a tiny BERT
  #     (2 blocks, hidden size 32) with parameters drawn from a fixed seed,
  #     mean pooling and L2 norm;
  #   * generation: Bumblebee's text generation serving on the tiny random
  #     Qwen3 of test/fixtures/qwen3_tiny, greedy, 8 new tokens; and the same
  #     streaming its text (:generation_stream);
  #   * jit: Nx.Serving.jit of a defn on Emily.Compiler (its results are
  #     Emily.Backend tensors), with Emily.Serving.distributed/1 (:jit) and
  #     without it (:jit_raw, what a caller on another node must not read).
  #
  # Both models share one tokenizer made here: WordPiece over a vocabulary of
  # 512 entries (the tiny Qwen3's), special tokens first, then the words of
  # @words, then filler pieces.
  import Nx.Defn

  @fixtures Path.expand("../fixtures", __DIR__)
  @vocab_size 512
  @specials ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  @words ~w(the a cat dog sat on mat ran to park small big red blue green fast slow
            emily runs tensors across nodes and every request gets an answer from
            one of them while another node goes down in the middle of its work)

  @embedding_batch 4
  @sequence_length 16
  @generation_batch 2
  @new_tokens 8

  def names do
    %{
      embedding: :emily_dist_embedding,
      generation: :emily_dist_generation,
      generation_stream: :emily_dist_generation_stream,
      jit: :emily_dist_jit,
      jit_raw: :emily_dist_jit_raw
    }
  end

  def texts do
    [
      "the cat sat on the mat",
      "emily runs tensors across nodes",
      "a small red dog ran to the park",
      "every request gets an answer",
      "another node goes down",
      "the big blue cat runs fast"
    ]
  end

  defn(affine(x), do: x * 2 + 1)

  ## Tokenizer

  def tokenizer do
    vocab =
      (@specials ++ @words)
      |> Enum.uniq()
      |> then(&(&1 ++ Enum.map(length(&1)..(@vocab_size - 1)//1, fn i -> "##p#{i}" end)))
      |> Enum.with_index()
      |> Map.new()

    json = %{
      "version" => "1.0",
      "truncation" => nil,
      "padding" => nil,
      "added_tokens" =>
        for {token, id} <- Enum.with_index(@specials) do
          %{
            "id" => id,
            "content" => token,
            "single_word" => false,
            "lstrip" => false,
            "rstrip" => false,
            "normalized" => false,
            "special" => true
          }
        end,
      "normalizer" => %{
        "type" => "BertNormalizer",
        "clean_text" => true,
        "handle_chinese_chars" => true,
        "strip_accents" => nil,
        "lowercase" => true
      },
      "pre_tokenizer" => %{"type" => "BertPreTokenizer"},
      "post_processor" => nil,
      "decoder" => %{"type" => "WordPiece", "prefix" => "##", "cleanup" => true},
      "model" => %{
        "type" => "WordPiece",
        "unk_token" => "[UNK]",
        "continuing_subword_prefix" => "##",
        "max_input_chars_per_word" => 100,
        "vocab" => vocab
      }
    }

    dir =
      Path.join(
        System.tmp_dir!(),
        "emily_serving_tokenizer_#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)

    try do
      File.write!(Path.join(dir, "tokenizer.json"), Jason.encode!(json))
      {:ok, tokenizer} = Bumblebee.load_tokenizer({:local, dir}, type: :bert)
      tokenizer
    after
      File.rm_rf!(dir)
    end
  end

  ## Servings

  @doc """
  The embedding serving. Options (the bench makes the model larger; the
  test uses the defaults): :hidden_size (32), :num_blocks (2),
  :num_attention_heads (2), :batch_size (#{@embedding_batch}),
  :sequence_length (#{@sequence_length}).
  """
  def embedding_serving(opts \\ []) do
    hidden = Keyword.get(opts, :hidden_size, 32)
    sequence_length = Keyword.get(opts, :sequence_length, @sequence_length)

    spec =
      Bumblebee.configure(Bumblebee.Text.Bert,
        architecture: :base,
        vocab_size: @vocab_size,
        max_positions: max(64, sequence_length),
        hidden_size: hidden,
        num_blocks: Keyword.get(opts, :num_blocks, 2),
        num_attention_heads: Keyword.get(opts, :num_attention_heads, 2),
        intermediate_size: 2 * hidden
      )

    model = Bumblebee.build_model(spec)
    {init, _predict} = Axon.build(model, seed: 17)

    template = %{
      "input_ids" => Nx.template({1, sequence_length}, :u32),
      "attention_mask" => Nx.template({1, sequence_length}, :u32)
    }

    params =
      Nx.with_default_backend(Emily.Backend, fn -> init.(template, Axon.ModelState.empty()) end)

    Bumblebee.Text.text_embedding(%{model: model, params: params, spec: spec}, tokenizer(),
      output_attribute: :hidden_state,
      output_pool: :mean_pooling,
      embedding_processor: :l2_norm,
      compile: [batch_size: batch_size(:embedding, opts), sequence_length: sequence_length],
      defn_options: [compiler: Emily.Compiler]
    )
  end

  def generation_serving(opts \\ []) do
    {:ok, model_info} =
      Bumblebee.load_model({:local, Path.join(@fixtures, "qwen3_tiny")}, backend: Emily.Backend)

    config =
      Bumblebee.configure(Bumblebee.Text.GenerationConfig,
        max_new_tokens: @new_tokens,
        pad_token_id: 0
      )

    Bumblebee.Text.generation(model_info, tokenizer(), config,
      compile: [batch_size: @generation_batch, sequence_length: @sequence_length],
      defn_options: [compiler: Emily.Compiler],
      stream: Keyword.get(opts, :stream, false)
    )
  end

  def jit_serving, do: Nx.Serving.jit(&affine/1, compiler: Emily.Compiler)

  def serving(:embedding, opts), do: embedding_serving(opts)
  def serving(:generation, _opts), do: generation_serving()
  def serving(:generation_stream, _opts), do: generation_serving(stream: true)
  def serving(:jit, _opts), do: Emily.Serving.distributed(jit_serving())
  def serving(:jit_raw, _opts), do: jit_serving()

  def batch_size(kind, opts \\ [])
  def batch_size(:embedding, opts), do: Keyword.get(opts, :batch_size, @embedding_batch)

  def batch_size(generation, _opts) when generation in [:generation, :generation_stream],
    do: @generation_batch

  def batch_size(_, _opts), do: 4

  @doc """
  Starts the named servings (keys of names/0) on this node under a
  supervisor that outlives the caller (an :erpc call's process). Options:
  :batch_timeout (ms, default 20), :distribution_weight (default 1) and
  :model (options of the embedding serving).
  """
  def start_servings(kinds, opts \\ []) do
    model = Keyword.get(opts, :model, [])

    children =
      for kind <- kinds do
        Supervisor.child_spec(
          {Nx.Serving,
           serving: serving(kind, model),
           name: names()[kind],
           batch_size: batch_size(kind, model),
           batch_timeout: Keyword.get(opts, :batch_timeout, 20),
           distribution_weight: Keyword.get(opts, :distribution_weight, 1)},
          id: kind
        )
      end

    {:ok, sup} = Supervisor.start_link(children, strategy: :one_for_one)
    Process.unlink(sup)
    {:ok, sup}
  end
end
