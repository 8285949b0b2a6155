if Code.ensure_loaded?(Bumblebee) do
  defmodule Emily.Bumblebee.GGUF do
    @moduledoc """
    Llama-architecture GGUF files (llama.cpp's format) as Bumblebee models.

        {:ok, model_info} = Emily.Bumblebee.GGUF.load_model(path)
        {:ok, tokenizer} = Emily.Bumblebee.GGUF.load_tokenizer(path)
        {:ok, generation_config} = Emily.Bumblebee.GGUF.load_generation_config(path)

        serving = Bumblebee.Text.generation(model_info, tokenizer, generation_config,
          compile: [batch_size: 1, sequence_length: 512],
          defn_options: [compiler: Emily.Compiler], stream: true)

    * **spec** — `Bumblebee.Text.Llama` for causal language modelling, from
      the file's `llama.*` metadata (sizes, heads, RoPE base, RMS norm
      epsilon; the output head tied to the embeddings when the file has no
      `output.weight`).
    * **parameters** — mapped by name (`blk.N.attn_q.weight` →
      `decoder.blocks.N.self_attention.query`, ...). Quantized matrices stay
      quantized: each dense layer's kernel is an `Emily.QuantizedWeight` of
      the file's blocks (read without a copy) and the layer runs
      `Emily.Quantization.quantized_matmul/2` on them
      (`Emily.Quantization.Transform.quantize_dense_layers/2`); norms, and
      the embedding table (a lookup), are dense. llama.cpp's converter
      reorders the rows of the query and key projections for its
      interleaved RoPE; they are put back in Hugging Face's order (whole
      rows of blocks move, nothing is dequantized) for Bumblebee's
      half-rotation RoPE.
    * **tokenizer** — byte-level BPE from `tokenizer.ggml.tokens` and
      `tokenizer.ggml.merges`, with the pre-tokenizer `tokenizer.ggml.pre`
      names, written as a `tokenizer.json` for the `tokenizers` library.

    Only what Bumblebee's Llama needs is read; other architectures raise.
    """

    alias Emily.Quantization.GGML

    @compile {:no_warn_undefined, [Axon, Axon.ModelState]}

    @doc "The model as `Bumblebee.load_model/2` returns it: `{:ok, %{model, params, spec}}`."
    def load_model(path, opts \\ []) do
      opts = Keyword.validate!(opts, type: {:f, 32}, backend: Emily.Backend)
      gguf = Emily.GGUF.open!(path)
      spec = spec(gguf)
      model = Bumblebee.build_model(spec) |> Emily.Quantization.Transform.quantize_dense_layers()
      model = tie_output_head(model)
      params = params(gguf, spec, opts[:type])

      # Axon.ModelState walks its leaves as tensors: build and freeze it on
      # stand-ins, then put the quantized weights in.
      stand_ins =
        Map.new(params, fn {layer, ps} ->
          {layer,
           Map.new(ps, fn {k, v} ->
             {k, if(is_struct(v, Nx.Tensor), do: v, else: Nx.tensor(0))}
           end)}
        end)

      state = Axon.ModelState.new(stand_ins) |> Axon.ModelState.freeze()
      state = %{state | data: params}

      {:ok, %{model: model, params: state, spec: spec}}
    end

    @doc "Bumblebee's Llama spec from the file's metadata."
    def spec(%Emily.GGUF{metadata: meta, tensors: tensors}) do
      arch = meta["general.architecture"]

      unless arch == "llama" do
        raise ArgumentError,
              "Emily.Bumblebee.GGUF reads llama-architecture files, this one is #{inspect(arch)}"
      end

      m = fn key -> Map.fetch!(meta, "llama." <> key) end
      names = MapSet.new(tensors, & &1.name)
      hidden = m.("embedding_length")
      heads = m.("attention.head_count")
      {vocab, _} = Enum.find(tensors, &(&1.name == "token_embd.weight")).shape

      Bumblebee.configure(Bumblebee.Text.Llama,
        architecture: :for_causal_language_modeling,
        vocab_size: vocab,
        max_positions: m.("context_length"),
        hidden_size: hidden,
        intermediate_size: m.("feed_forward_length"),
        attention_head_size: div(hidden, heads),
        num_blocks: m.("block_count"),
        num_attention_heads: heads,
        num_key_value_heads: Map.get(meta, "llama.attention.head_count_kv", heads),
        rotary_embedding_base: Map.get(meta, "llama.rope.freq_base", 10_000.0),
        layer_norm_epsilon: m.("attention.layer_norm_rms_epsilon"),
        tie_word_embeddings: not MapSet.member?(names, "output.weight")
      )
    end

    # ---- parameters ---------------------------------------------------------

    @block_names %{
      "attn_q" => "self_attention.query",
      "attn_k" => "self_attention.key",
      "attn_v" => "self_attention.value",
      "attn_output" => "self_attention.output",
      "attn_norm" => "self_attention_norm",
      "ffn_gate" => "ffn.gate",
      "ffn_up" => "ffn.intermediate",
      "ffn_down" => "ffn.output",
      "ffn_norm" => "output_norm"
    }

    defp params(gguf, spec, type) do
      tensors = Emily.GGUF.tensors!(gguf)
      head_size = spec.attention_head_size

      layers =
        for {name, value} <- tensors, reduce: %{} do
          acc ->
            case String.split(name, ".") do
              ["token_embd", "weight"] ->
                acc
                |> Map.put("embedder.token_embedding", %{"kernel" => dense(value, type)})
                |> put_output_head(spec, value)

              ["output", "weight"] ->
                Map.put(acc, "language_modeling_head.output", %{"kernel" => matrix(value, type)})

              ["output_norm", "weight"] ->
                Map.put(acc, "output_norm", %{"weight" => dense(value, type)})

              ["blk", n, part, "weight"] when is_map_key(@block_names, part) ->
                layer = "decoder.blocks.#{n}.#{@block_names[part]}"

                param =
                  case part do
                    "attn_q" ->
                      %{
                        "kernel" =>
                          matrix(unpermute(value, spec.num_attention_heads, head_size), type)
                      }

                    "attn_k" ->
                      %{
                        "kernel" =>
                          matrix(unpermute(value, spec.num_key_value_heads, head_size), type)
                      }

                    norm when norm in ["attn_norm", "ffn_norm"] ->
                      %{"weight" => dense(value, type)}

                    _ ->
                      %{"kernel" => matrix(value, type)}
                  end

                Map.put(acc, layer, param)

              _ ->
                acc
            end
        end

      layers
    end

    defp put_output_head(acc, %{tie_word_embeddings: true}, value),
      do: Map.put(acc, "language_modeling_head.output", %{"kernel" => head_matrix(value)})

    defp put_output_head(acc, _spec, _value), do: acc

    # The tied output head multiplies by the embedding table [vocab, hidden]
    # as it is stored: quantized blocks stay quantized.
    defp head_matrix({:ggml, type, shape, raw}), do: GGML.weight(raw, type, shape)
    defp head_matrix(%Nx.Tensor{} = t), do: t

    # A dense layer's kernel: a quantized weight [out, in] of the file's
    # blocks (transpose: true), or a dense tensor transposed to Axon's
    # [in, out].
    defp matrix({:ggml, type, shape, raw}, _type), do: GGML.weight(raw, type, shape)
    defp matrix(%Nx.Tensor{} = t, type), do: t |> Nx.as_type(type) |> Nx.transpose()

    defp dense({:ggml, gtype, shape, raw}, type),
      do: GGML.weight(raw, gtype, shape) |> GGML.dequantize(type)

    defp dense(%Nx.Tensor{} = t, type), do: Nx.as_type(t, type)

    # llama.cpp's converter stores each head's rows of the query and key
    # projections interleaved (row 2i + j holds Hugging Face's row
    # j * head_size / 2 + i) for its pairwise RoPE; put Hugging Face's order
    # back. Rows of quantized blocks are independent: the raw rows move.
    defp unpermute({:ggml, type, {rows, cols}, raw}, heads, head_size) do
      {:ggml, type, {rows, cols}, Nx.take(raw, hf_order(heads, head_size), axis: 0)}
    end

    defp unpermute(%Nx.Tensor{} = t, heads, head_size),
      do: Nx.take(t, hf_order(heads, head_size), axis: 0)

    defp hf_order(heads, head_size) do
      half = div(head_size, 2)

      for h <- 0..(heads - 1), j <- 0..1, i <- 0..(half - 1) do
        h * head_size + 2 * i + j
      end
      |> Nx.tensor(type: :s32, backend: Emily.Backend)
    end

    # Bumblebee's Llama head is a dense_transposed layer (kernel [vocab,
    # hidden]); with a quantized kernel it runs the quantized product.
    defp tie_output_head(model) do
      Axon.rewrite_nodes(model, fn
        %{op_name: :dense_transposed, name: name_fn} ->
          fn [x], _output ->
            kernel = Axon.param("kernel", fn shape -> {0, elem(shape, tuple_size(shape) - 1)} end)
            Axon.layer(&head_op/3, [x, kernel], name: name_fn, op_name: :dense_transposed)
          end

        _ ->
          :skip
      end)
    end

    @doc false
    def head_op(x, %Emily.QuantizedWeight{} = kernel, _opts),
      do: Emily.Quantization.quantized_matmul(x, kernel)

    def head_op(x, kernel, _opts), do: Nx.dot(x, [-1], kernel, [1])

    # ---- tokenizer and generation config -------------------------------------

    @doc """
    The file's tokenizer as a Bumblebee tokenizer (`{:ok, tokenizer}`):
    `tokenizer.ggml.model` "gpt2" (byte-level BPE) with the pre-tokenizer
    `tokenizer.ggml.pre` names ("smollm", "gpt2", "llama-bpe", "qwen2").
    """
    def load_tokenizer(path) do
      gguf = Emily.GGUF.open!(path)
      json = tokenizer_json(gguf.metadata)
      meta = gguf.metadata
      tokens = meta["tokenizer.ggml.tokens"]
      token = fn key -> Enum.at(tokens, Map.fetch!(meta, key)) end

      special = %{
        "bos_token" => token.("tokenizer.ggml.bos_token_id"),
        "eos_token" => token.("tokenizer.ggml.eos_token_id"),
        "unk_token" => token.("tokenizer.ggml.unknown_token_id"),
        "pad_token" => token.("tokenizer.ggml.padding_token_id")
      }

      dir =
        Path.join(System.tmp_dir!(), "emily_gguf_tokenizer_#{System.unique_integer([:positive])}")

      File.mkdir_p!(dir)

      try do
        File.write!(Path.join(dir, "tokenizer.json"), Jason.encode!(json))
        File.write!(Path.join(dir, "special_tokens_map.json"), Jason.encode!(special))
        Bumblebee.load_tokenizer({:local, dir}, type: :llama)
      after
        File.rm_rf(dir)
      end
    end

    @doc "Token ids of the generation config: bos, eos, pad from the file."
    def load_generation_config(path, opts \\ []) do
      meta = Emily.GGUF.open!(path).metadata

      config =
        Bumblebee.configure(
          Bumblebee.Text.GenerationConfig,
          Keyword.merge(
            [
              bos_token_id: meta["tokenizer.ggml.bos_token_id"],
              eos_token_id: meta["tokenizer.ggml.eos_token_id"],
              pad_token_id: meta["tokenizer.ggml.padding_token_id"],
              max_new_tokens: 64
            ],
            opts
          )
        )

      {:ok, config}
    end

    @doc "The chat template of the file (a Jinja source), or nil."
    def chat_template(path), do: Emily.GGUF.open!(path).metadata["tokenizer.chat_template"]

    # The splits llama.cpp names by `tokenizer.ggml.pre` (GPT-2's is the
    # ByteLevel pre-tokenizer's own).
    @llama3_regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
    @qwen2_regex "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

    defp byte_level(use_regex),
      do: %{
        "type" => "ByteLevel",
        "add_prefix_space" => false,
        "trim_offsets" => true,
        "use_regex" => use_regex
      }

    defp split(regex),
      do: %{
        "type" => "Split",
        "pattern" => %{"Regex" => regex},
        "behavior" => "Isolated",
        "invert" => false
      }

    defp pre_tokenizer("smollm"),
      do: %{
        "type" => "Sequence",
        "pretokenizers" => [%{"type" => "Digits", "individual_digits" => true}, byte_level(true)]
      }

    defp pre_tokenizer(pre) when pre in [nil, "default", "gpt2"], do: byte_level(true)

    defp pre_tokenizer("llama-bpe"),
      do: %{"type" => "Sequence", "pretokenizers" => [split(@llama3_regex), byte_level(false)]}

    defp pre_tokenizer("qwen2"),
      do: %{"type" => "Sequence", "pretokenizers" => [split(@qwen2_regex), byte_level(false)]}

    defp pre_tokenizer(pre),
      do: raise(ArgumentError, "GGUF tokenizer: pre-tokenizer #{inspect(pre)} is not supported")

    @doc false
    def tokenizer_json(meta) do
      unless meta["tokenizer.ggml.model"] == "gpt2" do
        raise ArgumentError,
              "GGUF tokenizer: only byte-level BPE (tokenizer.ggml.model \"gpt2\") is supported, " <>
                "got #{inspect(meta["tokenizer.ggml.model"])}"
      end

      tokens = meta["tokenizer.ggml.tokens"]
      types = meta["tokenizer.ggml.token_type"] || List.duplicate(1, length(tokens))

      # Token types 3 (control) and 4 (user defined) are added tokens.
      added =
        for {{content, type}, id} <- Enum.with_index(Enum.zip(tokens, types)), type in [3, 4] do
          %{
            "id" => id,
            "content" => content,
            "single_word" => false,
            "lstrip" => false,
            "rstrip" => false,
            "normalized" => type == 4,
            "special" => type == 3
          }
        end

      %{
        "version" => "1.0",
        "truncation" => nil,
        "padding" => nil,
        "added_tokens" => added,
        "normalizer" => nil,
        "pre_tokenizer" => pre_tokenizer(meta["tokenizer.ggml.pre"]),
        "post_processor" => Map.put(byte_level(true), "trim_offsets", false),
        "decoder" => byte_level(true),
        "model" => %{
          "type" => "BPE",
          "dropout" => nil,
          "unk_token" => nil,
          "continuing_subword_prefix" => nil,
          "end_of_word_suffix" => nil,
          "fuse_unk" => false,
          "byte_fallback" => false,
          "ignore_merges" => false,
          "vocab" => tokens |> Enum.with_index() |> Map.new(),
          "merges" => meta["tokenizer.ggml.merges"]
        }
      }
    end
  end
end
