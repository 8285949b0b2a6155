defmodule Emily.Tensor.Sigils do
  @moduledoc """
  The parser behind `Emily.Tensor.sigil_MAT/2` and
  `Emily.Tensor.sigil_VEC/2` (Nx's `~MAT` and `~VEC`).

  A sigil's text is rows of numbers: one number per whitespace-separated
  word, one row per line (`~VEC` takes one row). A number is an integer,
  a float (`1.5`, `-2.0e-3`), `inf`, `-inf`, `nan` (any case), or a
  complex `a+bi`, `a-bi`, `bi` or `i`. The type is the sigil's modifier (`u8`
  ... `f64`, `bf16`, `c64`, `c128`), else inferred as by
  `Emily.Tensor.tensor/2`. The text is parsed at compile time, so a typo
  fails the build with an `ArgumentError`.
  """

  @types ~w(u8 u16 u32 u64 s8 s16 s32 s64 f16 bf16 f32 f64 c64 c128)

  @doc """
  Parses the arguments of a sigil macro (the sigil's literal text and
  modifiers, as the compiler passes them or as written in a direct call:
  a string and a charlist or string). See `parse/3`.
  """
  @spec expand(Macro.t(), Macro.t(), :matrix | :vector) :: {list(), nil | {atom(), pos_integer()}}
  def expand(text, modifiers, kind) do
    text =
      case text do
        {:<<>>, _meta, [literal]} when is_binary(literal) -> literal
        literal when is_binary(literal) -> literal
        _ -> raise ArgumentError, "#{name(kind)} expects literal text (no interpolation)"
      end

    modifiers =
      cond do
        is_binary(modifiers) ->
          String.to_charlist(modifiers)

        is_list(modifiers) and Enum.all?(modifiers, &is_integer/1) ->
          modifiers

        true ->
          raise ArgumentError,
                "#{name(kind)} expects literal modifiers, got: #{Macro.to_string(modifiers)}"
      end

    parse(text, modifiers, kind)
  end

  @doc """
  Parses a sigil's text: `{rows, type}` for `:matrix` (a list of rows),
  `{row, type}` for `:vector`. `type` is nil without a modifier.

  ## Examples

      iex> Emily.Tensor.Sigils.parse("1 2\\n3 4", ~c"", :matrix)
      {[[1, 2], [3, 4]], nil}
      iex> Emily.Tensor.Sigils.parse("1.5 -inf nan 1-2i", ~c"c64", :vector)
      {[1.5, :neg_infinity, :nan, %Emily.Complex{re: 1.0, im: -2.0}], {:c, 64}}

  """
  @spec parse(String.t(), charlist(), :matrix | :vector) ::
          {list(), nil | {atom(), pos_integer()}}
  def parse(text, modifiers, kind) when is_binary(text) do
    type = type!(modifiers, kind)

    rows =
      text
      |> String.split("\n")
      |> Enum.map(&String.split/1)
      |> Enum.reject(&(&1 == []))
      |> Enum.map(fn row -> Enum.map(row, &number!(&1, kind)) end)

    case {kind, rows} do
      {_, []} ->
        raise ArgumentError, "#{name(kind)} expects at least one number, got: #{inspect(text)}"

      {:vector, [row]} ->
        {row, type}

      {:vector, _} ->
        raise ArgumentError, "~VEC expects one row of numbers, got: #{inspect(text)}"

      {:matrix, rows} ->
        {rows, type}
    end
  end

  defp name(:matrix), do: "~MAT"
  defp name(:vector), do: "~VEC"

  defp type!([], _kind), do: nil

  defp type!(modifiers, kind) do
    text = List.to_string(modifiers)

    if text in @types do
      Emily.Tensor.Type.normalize!(String.to_atom(text))
    else
      raise ArgumentError,
            "#{name(kind)}: unknown type modifier #{inspect(text)} (expected one of: " <>
              Enum.join(@types, ", ") <> ")"
    end
  end

  @real "[+-]?(?:\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?|inf|nan)"
  @complex Regex.compile!("^(#{@real})?(#{@real}|[+-])?i$", "i")

  defp number!(word, kind) do
    case real(word) do
      {:ok, x} ->
        x

      :error ->
        case Regex.run(@complex, word) do
          [_, re, im] -> Emily.Complex.new(part(re), imaginary(im))
          [_, re] when re != "" -> Emily.Complex.new(0.0, part(re))
          ["i"] -> Emily.Complex.new(0.0, 1.0)
          _ -> raise ArgumentError, "#{name(kind)}: cannot parse #{inspect(word)} as a number"
        end
    end
  end

  # "1i" has only an imaginary part (the regex puts it in the first group).
  defp imaginary(""), do: 1.0
  defp imaginary("+"), do: 1.0
  defp imaginary("-"), do: -1.0
  defp imaginary(text), do: part(text)

  defp part(""), do: 0.0

  defp part(text) do
    case real(text) do
      {:ok, x} when is_integer(x) -> x * 1.0
      {:ok, x} -> x
    end
  end

  defp real(word) do
    case String.downcase(word) do
      w when w in ["inf", "+inf"] ->
        {:ok, :infinity}

      "-inf" ->
        {:ok, :neg_infinity}

      w when w in ["nan", "+nan", "-nan"] ->
        {:ok, :nan}

      w ->
        case Integer.parse(w) do
          {n, ""} ->
            {:ok, n}

          _ ->
            case Float.parse(w) do
              {f, ""} -> {:ok, f}
              _ -> :error
            end
        end
    end
  end
end
