defmodule Tokenizers.Tokenizer do
  @moduledoc """
  A tokenizer read from Hugging Face's `tokenizer.json`.

  Implements the pipeline of HF `tokenizers`: added tokens, normalizer,
  pre-tokenizer, model (WordPiece, BPE, Unigram), truncation,
  post-processor, padding; and decoding. The functions follow the Elixir
  `tokenizers` package (the Rust NIF) where Bumblebee calls them.
  """

  alias Tokenizers.{
    AddedVocabulary,
    Decoder,
    Encoding,
    Model,
    Normalizer,
    PostProcessor,
    PreTokenizer,
    Text
  }

  defstruct [
    :model,
    :normalizer,
    :pre_tokenizer,
    :post_processor,
    :decoder,
    :added,
    :truncation,
    :padding
  ]

  @type t :: %__MODULE__{}

  @doc "Reads a `tokenizer.json` file."
  def from_file(path, _opts \\ []) do
    case File.read(path) do
      {:ok, json} -> from_buffer(json)
      {:error, reason} -> {:error, "#{path}: #{:file.format_error(reason)}"}
    end
  end

  @doc "Builds a tokenizer from the contents of a `tokenizer.json`."
  def from_buffer(json, _opts \\ []) do
    with {:ok, data} <- decode_json(json) do
      try do
        {:ok, from_map(data)}
      catch
        {:unsupported, what} -> {:error, "unsupported #{what}"}
      end
    end
  end

  defp decode_json(json) do
    case JSON.decode(json) do
      {:ok, %{"model" => _} = data} -> {:ok, data}
      {:ok, _} -> {:error, "not a tokenizer.json: no model"}
      {:error, reason} -> {:error, "invalid JSON: #{inspect(reason)}"}
    end
  end

  defp from_map(data) do
    normalizer = Normalizer.from_json(data["normalizer"])

    %__MODULE__{
      model: Model.from_json(data["model"]),
      normalizer: normalizer,
      pre_tokenizer: PreTokenizer.from_json(data["pre_tokenizer"]),
      post_processor: PostProcessor.from_json(data["post_processor"]),
      decoder: Decoder.from_json(data["decoder"]),
      added: AddedVocabulary.new(data["added_tokens"] || [], normalizer),
      truncation: truncation_from_json(data["truncation"]),
      padding: padding_from_json(data["padding"])
    }
  end

  defp truncation_from_json(nil), do: nil

  defp truncation_from_json(json) do
    %{
      max_length: json["max_length"],
      stride: json["stride"] || 0,
      strategy:
        case json["strategy"] do
          "OnlyFirst" -> :only_first
          "OnlySecond" -> :only_second
          _ -> :longest_first
        end,
      direction: if(json["direction"] == "Left", do: :left, else: :right)
    }
  end

  defp padding_from_json(nil), do: nil

  defp padding_from_json(json) do
    %{
      strategy:
        case json["strategy"] do
          %{"Fixed" => n} -> {:fixed, n}
          _ -> :batch_longest
        end,
      direction: if(json["direction"] == "Left", do: :left, else: :right),
      pad_to_multiple_of: json["pad_to_multiple_of"],
      pad_id: json["pad_id"] || 0,
      pad_type_id: json["pad_type_id"] || 0,
      pad_token: json["pad_token"] || "[PAD]"
    }
  end

  ## Configuration

  def disable_padding(%__MODULE__{} = t), do: %{t | padding: nil}
  def disable_truncation(%__MODULE__{} = t), do: %{t | truncation: nil}

  @doc """
  Truncation options: `:max_length` (512), `:stride` (0), `:strategy`
  (`:longest_first`, `:only_first`, `:only_second`), `:direction`
  (`:right`, `:left`).
  """
  def set_truncation(%__MODULE__{} = t, opts \\ []) do
    %{
      t
      | truncation: %{
          max_length: Keyword.get(opts, :max_length, 512),
          stride: Keyword.get(opts, :stride, 0),
          strategy: Keyword.get(opts, :strategy, :longest_first),
          direction: Keyword.get(opts, :direction, :right)
        }
    }
  end

  @doc """
  Padding options: `:strategy` (`:batch_longest` or `{:fixed, n}`),
  `:direction`, `:pad_id`, `:pad_type_id`, `:pad_token`, `:pad_to_multiple_of`.
  """
  def set_padding(%__MODULE__{} = t, opts \\ []) do
    %{
      t
      | padding: %{
          strategy: Keyword.get(opts, :strategy, :batch_longest),
          direction: Keyword.get(opts, :direction, :right),
          pad_to_multiple_of: opts[:pad_to_multiple_of],
          pad_id: Keyword.get(opts, :pad_id, 0),
          pad_type_id: Keyword.get(opts, :pad_type_id, 0),
          pad_token: Keyword.get(opts, :pad_token, "[PAD]")
        }
    }
  end

  def set_post_processor(%__MODULE__{} = t, post_processor),
    do: %{t | post_processor: post_processor}

  ## Vocabulary

  def token_to_id(%__MODULE__{added: added, model: model}, token) do
    Map.get(added.by_content, token) || Model.token_to_id(model, token)
  end

  def id_to_token(%__MODULE__{added: added, model: model}, id) do
    Map.get(added.by_id, id) || Model.id_to_token(model, id)
  end

  def get_vocab_size(%__MODULE__{added: added, model: model}, opts \\ []) do
    if Keyword.get(opts, :with_added_tokens, true),
      do:
        model.vocab_r
        |> Map.keys()
        |> Enum.concat(Map.keys(added.by_id))
        |> Enum.uniq()
        |> length(),
      else: Model.vocab_size(model)
  end

  ## Encoding

  @doc """
  Encodes a string or a `{string, string}` pair. Option
  `:add_special_tokens` (true).
  """
  def encode(%__MODULE__{} = t, input, opts \\ []) do
    case encode_batch(t, [input], opts) do
      {:ok, [encoding]} -> {:ok, encoding}
      error -> error
    end
  end

  @doc "Encodes a list of inputs (strings or pairs)."
  def encode_batch(%__MODULE__{} = t, inputs, opts \\ []) do
    add_special_tokens = Keyword.get(opts, :add_special_tokens, true)

    try do
      encodings = Enum.map(inputs, &encode_input(t, &1, add_special_tokens))
      {:ok, pad_batch(t.padding, encodings)}
    catch
      {:encode, message} -> {:error, message}
    end
  end

  defp encode_input(t, {a, b}, add) do
    first = encode_sequence(t, a, 0, 0)
    second = encode_sequence(t, b, 1, 1)
    {first, second} = truncate(t, first, second, add)
    PostProcessor.process(t.post_processor, [first, second], add)
  end

  defp encode_input(t, [a, b], add), do: encode_input(t, {a, b}, add)

  defp encode_input(t, text, add) when is_binary(text) do
    {enc, nil} = truncate(t, encode_sequence(t, text, 0, 0), nil, add)
    PostProcessor.process(t.post_processor, [enc], add)
  end

  defp encode_sequence(t, text, type_id, sequence_id) do
    text
    |> Text.new()
    |> then(&AddedVocabulary.split(t.added, :raw, &1))
    |> Enum.flat_map(fn
      {:token, _, _} = token ->
        [token]

      {:text, text} ->
        normalized = Normalizer.normalize(t.normalizer, text)
        AddedVocabulary.split(t.added, :normalized, normalized)
    end)
    |> Enum.flat_map(fn
      {:token, id, text} ->
        {_, s, _} = hd(text)
        {_, _, e} = List.last(text)
        [{id, Map.fetch!(t.added.by_id, id), {s, e}}]

      {:text, text} ->
        t.pre_tokenizer
        |> PreTokenizer.pre_tokenize([text])
        |> Enum.flat_map(&tokenize_word(t.model, &1))
    end)
    |> Encoding.new(type_id, sequence_id)
  end

  defp tokenize_word(model, word) do
    ranges = Text.byte_ranges(word)

    model
    |> Model.tokenize(Text.to_binary(word))
    |> Enum.map(fn {id, s, e} ->
      {id, Model.id_to_token(model, id), Text.offsets(ranges, s, e)}
    end)
  end

  defp truncate(%{truncation: nil}, a, b, _add), do: {a, b}

  defp truncate(%{truncation: trunc, post_processor: pp}, a, b, add) do
    n_added = if add, do: PostProcessor.added_tokens(pp, b != nil), else: 0
    max_length = max(trunc.max_length - n_added, 0)
    opts = [direction: trunc.direction]
    n_a = Encoding.n_tokens(a)
    n_b = if b, do: Encoding.n_tokens(b), else: 0

    cond do
      n_a + n_b <= max_length ->
        {a, b}

      b == nil ->
        {Encoding.truncate(a, max_length, opts), nil}

      trunc.strategy == :only_first ->
        {Encoding.truncate(a, max(max_length - n_b, 0), opts), b}

      trunc.strategy == :only_second ->
        {a, Encoding.truncate(b, max(max_length - n_a, 0), opts)}

      true ->
        # longest first: the shorter keeps its length when it fits in half
        short = min(n_a, n_b)
        long = if short > max_length, do: short, else: max(short, max_length - short)

        {short, long} =
          if short + long > max_length,
            do: {div(max_length, 2), div(max_length, 2) + rem(max_length, 2)},
            else: {short, long}

        {len_a, len_b} = if n_a > n_b, do: {long, short}, else: {short, long}
        {Encoding.truncate(a, len_a, opts), Encoding.truncate(b, len_b, opts)}
    end
  end

  defp pad_batch(nil, encodings), do: encodings

  defp pad_batch(padding, encodings) do
    target =
      case padding.strategy do
        {:fixed, n} -> n
        _ -> encodings |> Enum.map(&Encoding.n_tokens/1) |> Enum.max(fn -> 0 end)
      end

    target =
      case padding.pad_to_multiple_of do
        m when is_integer(m) and m > 0 and rem(target, m) != 0 -> target + m - rem(target, m)
        _ -> target
      end

    Enum.map(
      encodings,
      &Encoding.pad(&1, target,
        pad_id: padding.pad_id,
        pad_type_id: padding.pad_type_id,
        pad_token: padding.pad_token,
        direction: padding.direction
      )
    )
  end

  ## Decoding

  @doc "Decodes ids to text; option `:skip_special_tokens` (true)."
  def decode(%__MODULE__{} = t, ids, opts \\ []) do
    skip = Keyword.get(opts, :skip_special_tokens, true)

    tokens =
      for id <- ids,
          token = id_to_token(t, id),
          token != nil,
          not (skip and AddedVocabulary.special?(t.added, token)),
          do: token

    {:ok, Decoder.decode(t.decoder, tokens)}
  rescue
    e -> {:error, Exception.message(e)}
  end

  def decode_batch(%__MODULE__{} = t, batch, opts \\ []) do
    Enum.reduce_while(batch, {:ok, []}, fn ids, {:ok, acc} ->
      case decode(t, ids, opts) do
        {:ok, text} -> {:cont, {:ok, [text | acc]}}
        error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, texts} -> {:ok, Enum.reverse(texts)}
      error -> error
    end
  end
end
