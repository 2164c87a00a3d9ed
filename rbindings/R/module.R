# The module system, torch for R's: nn_module() generators whose instances keep their state in an
# environment (`self`), parameters and buffers named by path as torch names them ("0.weight" in a
# sequential), state dicts, train/eval modes, module lists and dicts.
#
# rfuse's masks (trace.R) apply to `forward` and the other methods, which may see traced values;
# `initialize` runs exactly as written, in the environments it would see without rfuse (it only
# builds state, so there is nothing to trace or guard).

#' Define a module, torch-for-R style
#'
#' `nn_module()` returns a generator: calling it runs `initialize` on a new instance, whose
#' methods see it as `self` (and, with `inherit`, the parent's methods as `super`; with
#' `private`, those members as `private`). Calling the instance runs `forward`. Members that are
#' not functions become fields of every instance; `active` members are active bindings.
#'
#' Fields that are [nn_parameter()]s make up `$parameters`, [nn_buffer()]s (and
#' `$register_buffer()`) `$buffers`, modules `$children`; `$state_dict()` has them all by torch's
#' names and `$load_state_dict()` takes one back. `$train()` / `$eval()` set `$training`
#' everywhere below; `$apply(fn)` calls `fn` on every submodule and then the module;
#' `$requires_grad_(FALSE)` freezes the parameters ([rf_fit()] then leaves them as they are).
#'
#' @param classname Class name of the instances.
#' @param inherit A generator to inherit from.
#' @param ... Methods (`initialize`, `forward`, others) and fields.
#' @param private,active Lists of private members and of active bindings (functions).
#' @param parent_env The environment the methods' free variables resolve in.
#' @return A generator function.
#' @examples
#' Net <- nn_module("Net",
#'   initialize = function() { self$fc <- nn_linear(4, 2) },
#'   forward = function(x) nnf_relu(self$fc(x)))
#' net <- Net()
#' net(matrix(rnorm(8), 2))
#' names(net$state_dict())
#' @export
nn_module <- function(classname = NULL, inherit = NULL, ..., private = NULL, active = NULL,
                      parent_env = parent.frame()) {
  call <- sys.call()
  members <- list(...)
  if (length(members) && (is.null(names(members)) || any(names(members) == "")))
    rf_abort("rfuse_type_error", "nn_module()'s members must be named (initialize = , forward = , ...)", call)
  parent <- NULL
  if (!is.null(inherit)) {
    parent <- attr(inherit, "rfuse_module")
    if (is.null(parent)) rf_abort("rfuse_type_error", "`inherit` must be a generator made by nn_module()", call)
  }
  for (what in c("private", "active"))
    if (!is.null(get(what)) && (!is.list(get(what)) || is.null(names(get(what)))))
      rf_abort("rfuse_type_error", sprintf("`%s` must be a named list", what), call)
  if (!is.null(active) && !all(vapply(active, is.function, TRUE)))
    rf_abort("rfuse_type_error", "`active` members must be functions", call)
  # (runs while the package loads, before sym.R's %||% exists)
  if (is.null(classname)) classname <- if (is.null(parent)) "nn_module" else parent$classname
  def <- list(classname = classname, parent = parent,
              members = members, private = private, active = active, parent_env = parent_env)
  # The arguments reach initialize as the caller's promises (lazy, and `!!!` splices).
  gen <- function(...) new_module(def, ...)
  attr(gen, "rfuse_module") <- def
  class(gen) <- c("nn_module_generator", "function")
  gen
}

# A generator's definition as torch's (R6) generators show it: block$public_fields$expansion,
# $classname.
#' @export
`$.nn_module_generator` <- function(x, name) {
  def <- attr(x, "rfuse_module")
  members <- function(d) c(if (!is.null(d$parent)) members(d$parent), d$members)
  all <- members(def)
  switch(name,
    classname = def$classname,
    public_fields = all[!vapply(all, is.function, TRUE)],
    public_methods = all[vapply(all, is.function, TRUE)],
    private_fields = def$private[!vapply(def$private, is.function, TRUE)],
    private_methods = def$private[vapply(def$private, is.function, TRUE)],
    active = def$active,
    rf_unsupported(paste0("$", name), sys.call(), "a module generator has $classname, $public_fields, $public_methods, $private_fields, $private_methods and $active"))
}

#' @export
print.nn_module_generator <- function(x, ...) {
  cat(sprintf("<nn_module generator: %s>\n", attr(x, "rfuse_module")$classname))
  invisible(x)
}

# The names rfuse defines on every instance (not fields of the model).
module_api <- c("parameters", "buffers", "children", "modules", "training", "named_parameters",
                "named_buffers", "state_dict", "load_state_dict", "train", "eval", "apply", "add_module",
                "register_module", "register_buffer", "register_parameter", "to", "cuda", "cpu",
                "requires_grad_", "zero_grad", "forward", "initialize")

# A new instance, initialized with the generator's arguments. An argument initialize does not
# have is refused by name (torch's layers take some rfuse's do not, such as `device`).
# A module of definition `def` with its methods bound and its API, before initialize runs.
make_module <- function(def) {
  self <- new.env(parent = emptyenv())
  register_module_self(self)
  self$training <- TRUE
  self$.buffer_names <- character()
  self$.order <- character()
  # Called on rf_tensors outside traced code, a module runs as its compiled program on their
  # device and in their dtype (its layers' base-R paths take R arrays). With a tensor that
  # records for backward() it runs op by op, so that the graph is recorded.
  instance <- structure(function(...) {
    if (!in_trace() && isTRUE(self$.record_whole) && (any_requires_grad(...) || parameters_record(self)))
      return(record_forward(self, list(...)))
    if (!in_trace() && any_tensor(...) && !any_requires_grad(...) && !parameters_record(self)) {
      if (is.null(self$.jit)) {
        self$.jit <- rf_jit(instance)
        assign("internal", TRUE, envir = attr(self$.jit, "rfuse")$notes) # called eagerly: no recompile warning
      }
      return(self$.jit(...))
    }
    self$forward(...)
  }, class = c(def$classname, "nn_module"), self = self)
  self$.instance <- instance
  self$.classes <- class(instance) # torch's m$.classes
  bind_members(def, self, self)
  add_module_api(self, instance)
  self$.def <- def # (what clone_module() builds a copy from)
  instance
}

new_module <- function(def, ...) {
  instance <- make_module(def)
  self <- self_of(instance)
  init <- self$initialize
  given <- ...names()
  allowed <- names(formals(init))
  if (!"..." %in% allowed) {
    unknown <- setdiff(given[nzchar(given)], allowed)
    if (length(unknown))
      rf_abort("rfuse_unsupported", sprintf("%s() has no argument %s (its arguments: %s); see the porting table in docs/r-package.md",
                                            def$classname, paste0("`", unknown, "`", collapse = ", "),
                                            paste(allowed, collapse = ", ")), sys.call(-1))
  }
  init(...)
  adopt_marked_fields(self)
  instance
}

# An independent copy of a module, as torch's copy.deepcopy makes one: the same definition with
# its methods bound to the copy, and every field copied — submodules copied the same way, tensors
# and arrays into new memory, other R values as they are — private fields too; nothing of the
# copy is the original's (nn_transformer_encoder's layers).
clone_module <- function(instance) {
  old <- self_of(instance)
  copy <- make_module(old$.def)
  new <- self_of(copy)
  value_copy <- function(v) {
    if (is_module(v)) return(clone_module(v))
    if (is_tensor(v)) { # new memory, the same flags (a parameter, requires_grad)
      t <- rf_tensor(tensor_values(v), dtype = v@env$dtype, device = v@env$device)
      for (f in setdiff(ls(v@env, all.names = TRUE), c("buf", "grad", "rdim", "len", "dtype", "device")))
        assign(f, get(f, envir = v@env), envir = t@env)
      return(t)
    }
    if (is.list(v) && !is.object(v)) return(lapply(v, value_copy))
    # A parameter's array in new memory: write-backs find a module's parameter by the object
    # itself (register_module_self), which an R copy-on-modify value would still share.
    if (is.atomic(v) && length(v)) return(.rf_duplicate(v))
    v
  }
  skip <- c(".instance", ".classes", ".jit", ".def", "self")
  for (nm in setdiff(ls(old, all.names = TRUE), skip)) {
    if (bindingIsActive(nm, old)) next
    if (exists(nm, envir = new, inherits = FALSE) && is.function(get(nm, envir = new)) && is.function(get(nm, envir = old)))
      next # methods and API, bound to the copy already
    assign(nm, value_copy(get(nm, envir = old)), envir = new)
  }
  private_of <- function(m) {
    e <- environment(m$initialize)
    while (!identical(e, emptyenv()) && !exists("private", envir = e, inherits = FALSE)) e <- parent.env(e)
    if (identical(e, emptyenv())) NULL else get("private", envir = e)
  }
  po <- private_of(old); pn <- private_of(new)
  if (!is.null(po) && !is.null(pn))
    for (nm in ls(po, all.names = TRUE)) if (!bindingIsActive(nm, po)) assign(nm, value_copy(get(nm, envir = po)), envir = pn)
  copy
}

# A layer whose forward works on traced values only (recurrent layers, attention), called on
# tensors that record for backward(): its compiled program gives the values, and each tensor of
# its result is one recorded op, the whole forward as a function of the inputs and parameters,
# which backward() traces. Keyed by the instance (its settings are fixed at initialize) and its
# training mode. (Dropout inside such a layer draws its masks in each program: the gradient is
# that of the loss backward() computes, with its own masks.)
record_forward <- function(self, args) {
  instance <- self$.instance
  if (is.null(self$.uid)) self$.uid <- .rf_counters$next_module <- (.rf_counters$next_module %||% 0) + 1
  if (is.null(self$.jit)) {
    self$.jit <- rf_jit(instance)
    assign("internal", TRUE, envir = attr(self$.jit, "rfuse")$notes)
  }
  if (is.null(self$.forward_fn)) self$.forward_fn <- model_function(instance)
  # A named argument given as NULL is the layer's default (a jitted function takes no NULLs).
  if (!is.null(names(args))) args <- args[!(nzchar(names(args)) & vapply(args, is.null, TRUE))]
  values <- do.call(self$.jit, args) # (which takes list arguments itself)
  # A list argument (an LSTM's hx = list(h, c)) is recorded as its tensors, rebuilt inside.
  forward_fn <- self$.forward_fn
  list_key <- ""
  if (has_list_args(args)) {
    lists <- flatten_list_args(args)
    args <- lists$flat
    list_key <- lists$key
    forward_fn <- model_function(instance, lists$rebuild)
  }
  params <- slot_values(state_slots(self))
  key <- sprintf("forward:%s#%d:%s:%s%s", class(instance)[1], self$.uid, if (isTRUE(self$training)) "train" else "eval",
                 .rf_counters$module_version %||% 0, list_key)
  grad <- !isTRUE(.rf_counters$no_grad)
  node_args <- c(args, params)
  for (a in Filter(is_tensor, node_args)) a@env$uses <- (a@env$uses %||% 0) + 1 # (see record_inplace)
  wrap <- function(v, path) {
    if (is.list(v)) return(lapply(seq_along(v), function(i) wrap(v[[i]], c(path, i))))
    if (!is_tensor(v)) return(v)
    fn <- forward_fn
    t <- make_tensor(buf = v@env$buf, dtype = v@env$dtype, device = v@env$device, rdim = v@env$rdim, len = v@env$len,
                     node = list(name = paste0(key, "[", paste(path, collapse = ","), "]"),
                                 fn = function(...) { r <- fn(...); for (i in path) r <- r[[i]]; r },
                                 args = node_args, settings = character()))
    t@env$requires_grad <- grad
    t
  }
  wrap(values, integer())
}

# Whether calling the module records a graph through parameters an optimizer took (checked only
# once some optimizer has taken a module's parameters this session).
parameters_record <- function(self) {
  if (!isTRUE(.rf_counters$module_tensors) || isTRUE(.rf_counters$no_grad)) return(FALSE)
  for (p in module_parameters(self)) if (is_tensor(p) && isTRUE(p@env$requires_grad)) return(TRUE)
  FALSE
}

any_requires_grad <- function(...) {
  for (a in list(...)) if (is_tensor(a) && isTRUE(a@env$requires_grad)) return(TRUE)
  FALSE
}

# Methods and fields of `def` (its parents' first) into `target`. Every method's environment is a
# frame holding `self` (and `super`, `private`) whose parent is the definition's parent_env.
bind_members <- function(def, self, target) {
  super <- NULL
  if (!is.null(def$parent)) {
    super <- new.env(parent = emptyenv())
    bind_members(def$parent, self, super)
    for (nm in ls(super, all.names = TRUE)) assign(nm, get(nm, envir = super), envir = target)
  }
  private <- new.env(parent = emptyenv())
  # torch's modules keep their children in private$modules_, which torchvision's code reads.
  makeActiveBinding("modules_", function() module_children(self), private)
  frame <- new.env(parent = def$parent_env)
  frame$self <- self
  frame$private <- private
  if (!is.null(super)) frame$super <- super
  torch_code <- !identical(topenv(def$parent_env), rfuse_namespace())
  bind <- function(f, name) {
    environment(f) <- frame
    # initialize only builds state: it runs as written. Other methods may see traced values.
    # A user's module is torch code: its operators broadcast as torch's (see torch_operator).
    if (name != "initialize") return(mask_function(f, side_effect_guards = FALSE, torch_ops = torch_code))
    if (torch_code) environment(f) <- list2env(torch_operators(), envir = new.env(parent = frame))
    f
  }
  for (nm in names(def$members)) {
    v <- def$members[[nm]]
    if (is.function(v) && !inherits(v, "nn_module") && !inherits(v, "nn_module_generator"))
      assign(nm, bind(v, nm), envir = target)
    else assign(nm, v, envir = target)
  }
  for (nm in names(def$private)) {
    v <- def$private[[nm]]
    assign(nm, if (is.function(v)) bind(v, nm) else v, envir = private)
  }
  for (nm in names(def$active)) makeActiveBinding(nm, bind(def$active[[nm]], nm), self)
  if (!identical(self, target)) return(invisible())
  if (is.null(self$initialize)) self$initialize <- function(...) {
    if (...length()) rf_abort("rfuse_type_error", "this module takes no arguments (it has no initialize method)")
    invisible(NULL)
  }
  if (is.null(self$forward))
    self$forward <- function(...) rf_abort("rfuse_type_error", sprintf("module '%s' has no forward method", def$classname))
}

#' Mark an array as a module parameter or buffer
#'
#' `nn_parameter()` marks a trainable parameter (`requires_grad = FALSE`: a frozen one);
#' `nn_buffer()` a buffer: state saved in the state dict but not trained (batch norm's running
#' statistics).
#' @param x A numeric array.
#' @param requires_grad Whether training updates the parameter.
#' @param persistent Whether the buffer is part of the state dict.
#' @return `x`, classed `rf_parameter` / `rf_buffer`.
#' @examples
#' nn_parameter(matrix(0.5, 2, 2))
#' @export
nn_parameter <- function(x, requires_grad = TRUE) {
  if (is_tensor(x)) x <- tensor_values(x) # (a vector stays one: as.array() would give it a dim)
  if (!(is.numeric(x) || is.logical(x)))
    rf_abort("rfuse_type_error", sprintf("a parameter must be numeric, not %s", paste(class(x), collapse = "/")), sys.call())
  keep <- if (isFALSE(requires_grad)) FALSE
  # Already such a parameter (rf_fit's trained values): itself, its values not copied.
  if (identical(oldClass(x), c("rf_parameter", implicit_class(x))) && identical(attr(x, "requires_grad"), keep))
    return(x)
  x <- unclass(x)
  attr(x, "requires_grad") <- keep
  structure(x, class = c("rf_parameter", class(x)))
}

# class(unclass(x)) without unclass()'s copy of a shared x's values (`dims`: of an array of x's
# type with those dims).
implicit_class <- function(x, dims = dim(x)) {
  d <- length(dims)
  if (d == 2L) c("matrix", "array") else if (d) "array" else if (is.double(x)) "numeric" else typeof(x)
}

#' @rdname nn_parameter
#' @export
nn_buffer <- function(x, persistent = TRUE) {
  if (is_tensor(x)) x <- tensor_values(x) # (a vector stays one: as.array() would give it a dim)
  structure(list(value = x, persistent = isTRUE(persistent)), class = "rf_buffer")
}

# Until initialize() returns and the module adopts it, an nn_buffer() field is this marker; code
# in initialize that computes with it (`self$b2 <- nn_buffer(2 * pi * self$b1)`) gets its value,
# as torch's buffer is a tensor there.
buffer_value <- function(x) if (inherits(x, "rf_buffer")) unclass(x)$value else x
#' @export
Ops.rf_buffer <- function(e1, e2) {
  if (missing(e2)) return(get(.Generic)(buffer_value(e1)))
  get(.Generic)(buffer_value(e1), buffer_value(e2))
}
#' @export
Math.rf_buffer <- function(x, ...) get(.Generic)(buffer_value(x), ...)
#' @export
as.array.rf_buffer <- function(x, ...) as.array(buffer_value(x), ...)
#' @export
dim.rf_buffer <- function(x) dim(buffer_value(x))
#' @export
length.rf_buffer <- function(x) length(buffer_value(x))
#' @export
`[.rf_buffer` <- function(x, ...) {
  v <- buffer_value(x)
  v[...]
}

# Fields assigned as nn_buffer(v) in initialize become buffers holding v.
adopt_marked_fields <- function(self) {
  for (nm in ls(self)) {
    if (bindingIsActive(nm, self)) next
    v <- get(nm, envir = self)
    if (inherits(v, "rf_buffer")) register_buffer(self, nm, unclass(v)$value, unclass(v)$persistent)
  }
}

register_buffer <- function(self, name, value, persistent = TRUE) {
  if (is_tensor(value)) value <- tensor_values(value)
  assign(name, value, envir = self)
  self$.buffer_names <- union(self$.buffer_names, name)
  if (!persistent) self$.transient <- union(self$.transient, name)
  invisible(NULL)
}

#' @export
print.rf_parameter <- function(x, ...) {
  cat("rfuse parameter\n")
  print(unclass(x), ...)
  invisible(x)
}

# The fields of `self` in torch's order: sequential and module-list children by position, then
# the others by name.
field_names <- function(self) {
  nm <- setdiff(ls(self), module_api)
  nm <- nm[!vapply(nm, bindingIsActive, TRUE, self)]
  c(intersect(self$.order, nm), sort(setdiff(nm, self$.order)))
}

is_module <- function(v) inherits(v, "nn_module")
self_of <- function(m) attr(m, "self")

# A parameter is an R array marked by nn_parameter(), or, once an optimizer has taken it
# (torch's loop: optim_adam(model$parameters)), an rf_tensor leaf that the module holds in its
# place, so that forward() records the graph loss$backward() differentiates and opt$step()
# updates it where the module reads it.
is_parameter <- function(v) inherits(v, "rf_parameter") || is_tensor(v) && isTRUE(v@env$parameter)

parameter_frozen <- function(p)
  if (is_tensor(p)) !isTRUE(p@env$requires_grad) else identical(attr(p, "requires_grad"), FALSE)

# Parameters of a module and its submodules, as a named list (names: paths like "fc.weight").
module_parameters <- function(self, prefix = "") {
  out <- list()
  for (nm in field_names(self)) {
    v <- get(nm, envir = self)
    if (is_parameter(v)) out[[paste0(prefix, nm)]] <- v
    else if (is_module(v)) out <- c(out, module_parameters(self_of(v), paste0(prefix, nm, ".")))
  }
  out
}

# `$parameters` as torch users pass it to an optimizer: the values, and where each lives (its
# module's environment and field), which the optimizer needs to put its tensors there.
parameter_list <- function(self) {
  slots <- parameter_slots(self)
  values <- slot_values(slots)
  names(values) <- names(module_parameters(self))
  structure(values, class = "rf_parameter_list", homes = slots)
}

#' @export
`[.rf_parameter_list` <- function(x, i, ...) {
  keep <- stats::setNames(seq_along(x), names(x))[i]
  structure(unclass(x)[i], class = "rf_parameter_list", homes = attr(x, "homes")[keep])
}

#' @export
c.rf_parameter_list <- function(...) {
  parts <- list(...)
  homes <- unlist(lapply(parts, function(p)
    if (inherits(p, "rf_parameter_list")) attr(p, "homes")
    else rep(list(NULL), if (is.list(p)) length(p) else 1L)), recursive = FALSE)
  values <- do.call(c, lapply(parts, function(p) if (inherits(p, "rf_parameter_list")) unclass(p) else if (is.list(p)) p else list(p)))
  attributes(values) <- NULL
  names(values) <- unlist(lapply(parts, function(p) names(p) %||% rep("", if (is.list(p)) length(p) else 1L)))
  structure(values, class = "rf_parameter_list", homes = homes)
}

#' @export
print.rf_parameter_list <- function(x, ...) {
  print(unclass(structure(x, homes = NULL)), ...)
  invisible(x)
}

module_buffers <- function(self, prefix = "", persistent_only = FALSE) {
  out <- list()
  for (nm in field_names(self)) {
    v <- get(nm, envir = self)
    if (nm %in% self$.buffer_names && !(persistent_only && nm %in% self$.transient)) out[[paste0(prefix, nm)]] <- v
    else if (is_module(v)) out <- c(out, module_buffers(self_of(v), paste0(prefix, nm, "."), persistent_only))
  }
  out
}

module_children <- function(self) {
  out <- list()
  for (nm in field_names(self)) {
    v <- get(nm, envir = self)
    if (is_module(v)) out[[nm]] <- v
  }
  out
}

# The module and every module below it, depth first (torch's $modules).
module_tree <- function(instance, prefix = "") {
  out <- stats::setNames(list(instance), prefix)
  kids <- module_children(self_of(instance))
  for (nm in names(kids)) out <- c(out, module_tree(kids[[nm]], if (nzchar(prefix)) paste0(prefix, ".", nm) else nm))
  out
}

# Where each parameter lives (its module's environment and name), in module_parameters()'s
# order: a jitted model reads its parameters through these on every call, which costs no walk.
parameter_slots <- function(self) {
  out <- list()
  for (nm in field_names(self)) {
    v <- get(nm, envir = self)
    if (is_parameter(v)) out[[length(out) + 1]] <- list(self, nm)
    else if (is_module(v)) out <- c(out, parameter_slots(self_of(v)))
  }
  out
}

# Where each numeric buffer lives (batch norm's running statistics, nn_buffer()s), in
# module_buffers()'s order.
buffer_slots <- function(self) {
  out <- list()
  for (nm in field_names(self)) {
    v <- get(nm, envir = self)
    if (nm %in% self$.buffer_names) { if (is.numeric(v) || is.logical(v)) out[[length(out) + 1]] <- list(self, nm) }
    else if (is_module(v)) out <- c(out, buffer_slots(self_of(v)))
  }
  out
}

slot_values <- function(slots) lapply(slots, function(s) get(s[[2]], envir = s[[1]]))
set_slots <- function(slots, values) for (i in seq_along(slots)) assign(slots[[i]][[2]], values[[i]], envir = slots[[i]][[1]])

# The state a jitted model reads at every call, as inputs of its program: parameters, then
# buffers (so a program never holds running statistics that training has changed since).
state_slots <- function(self) c(parameter_slots(self), buffer_slots(self))

# A model's state values, through slots cached in `notes` (made again after any module's
# fields were assigned with `$<-`: the structure may have changed).
model_parameter_values <- function(model, notes) {
  if (is.null(notes$slots) || !identical(notes$slots_version, .rf_counters$module_version)) {
    notes$slots <- state_slots(self_of(model))
    notes$slots_version <- .rf_counters$module_version
  }
  slot_values(notes$slots)
}

set_training <- function(self, mode) {
  self$training <- mode
  for (m in module_children(self)) set_training(self_of(m), mode)
  module_changed() # jitted models key their programs by the modes (training_signature)
}

# What a model's program holds as constants besides its inputs: the modules' training modes
# (dropout, batch norm) and their other fields (settings, masks, tables) — part of a jitted
# model's cache key, remade after a module changed (`$<-`, $train(), $eval(), load_state_dict()).
# (A method assigning `self$field` directly changes none of this: such a field is read at trace.)
training_signature <- function(model, notes) {
  v <- .rf_counters$module_version %||% 0
  if (!identical(notes$training_version, v)) {
    modes <- paste(vapply(module_tree(model), function(m) if (isTRUE(self_of(m)$training)) "T" else "E", ""),
                   collapse = "")
    fields <- lapply(module_tree(model), function(m) {
      s <- self_of(m)
      vals <- mget(field_names(s), envir = s)
      vals <- vals[!vapply(names(vals), function(nm) {
        x <- vals[[nm]]
        is.function(x) || is_module(x) || is_parameter(x) || nm %in% s$.buffer_names
      }, TRUE)]
      # A tensor field (a mask made in initialize) by its values: the program holds them.
      lapply(vals, function(x) if (is_tensor(x)) list(x$dtype, tensor_values(x)) else x)
    })
    notes$training_sig <- paste0(modes, ":", .rf_hash(fields))
    notes$training_version <- v
  }
  notes$training_sig
}

# Sets state `path` ("fc.weight") of a module to `value`.
set_parameter <- function(self, path, value) {
  parts <- strsplit(path, ".", fixed = TRUE)[[1]]
  for (p in parts[-length(parts)]) self <- self_of(get(p, envir = self))
  assign(parts[length(parts)], value, envir = self)
}

# Sets parameter `path` to the values of R array `value`: into the tensor an optimizer holds (in
# place, keeping its dtype, device and requires_grad), else as a new nn_parameter() array that
# keeps the old one's requires_grad.
store_parameter <- function(self, path, value) {
  old <- module_at_path(self, path)
  if (is_tensor(old) && isTRUE(old@env$parameter)) {
    assign_inplace(old, "load", if (is.null(old@env$rdim)) as.vector(value) else array(value, old@env$rdim))
    old@env$node <- NULL
  } else set_parameter(self, path, nn_parameter(value, !identical(attr(old, "requires_grad"), FALSE)))
}

module_at_path <- function(self, path) {
  parts <- strsplit(path, ".", fixed = TRUE)[[1]]
  for (p in parts[-length(parts)]) self <- self_of(get(p, envir = self))
  get(parts[length(parts)], envir = self)
}

state_value <- function(v) {
  if (is_tensor(v)) return(tensor_values(v))
  v <- unclass(v)
  attr(v, "requires_grad") <- NULL
  v
}

load_state_dict <- function(instance, state_dict, strict = TRUE) {
  call <- sys.call(-1)
  if (!is.list(state_dict) || (length(state_dict) && is.null(names(state_dict))))
    rf_abort("rfuse_type_error", "load_state_dict() takes a named list (a state dict)", call)
  self <- self_of(instance)
  params <- module_parameters(self)
  current <- c(params, module_buffers(self, persistent_only = TRUE))
  missing_keys <- setdiff(names(current), names(state_dict))
  unexpected <- setdiff(names(state_dict), names(current))
  if (isTRUE(strict) && (length(missing_keys) || length(unexpected)))
    rf_abort("rfuse_type_error", paste0("Error(s) in loading state_dict: ",
                                        if (length(missing_keys)) paste0("missing keys: ", paste(missing_keys, collapse = ", "), ". "),
                                        if (length(unexpected)) paste0("unexpected keys: ", paste(unexpected, collapse = ", "), ".")), call)
  for (nm in intersect(names(current), names(state_dict))) {
    v <- state_dict[[nm]]
    if (is_tensor(v)) v <- as.array(v)
    old <- current[[nm]]
    if (!identical(as.integer(t_size(v)), as.integer(t_size(state_value(old)))))
      rf_abort("rfuse_shape_error", sprintf("size mismatch for %s: copying a param with shape %s, the shape in the current model is %s",
                                            nm, paste(t_size(v), collapse = "x"), paste(t_size(state_value(old)), collapse = "x")), call)
    v <- if (is.null(dim(state_value(old)))) as.double(v) else array(as.double(v), dim(state_value(old)))
    if (nm %in% names(params)) store_parameter(self, nm, v)
    else set_parameter(self, nm, v)
  }
  module_changed()
  invisible(instance)
}

add_module_api <- function(self, instance) {
  makeActiveBinding("parameters", function() parameter_list(self), self)
  makeActiveBinding("buffers", function() module_buffers(self), self)
  makeActiveBinding("children", function() module_children(self), self)
  makeActiveBinding("modules", function() unname(module_tree(instance)), self)
  self$named_parameters <- function(prefix = "", recurse = TRUE) {
    p <- if (recurse) module_parameters(self) else Filter(is_parameter, mget(field_names(self), self))
    stats::setNames(p, paste0(prefix, names(p)))
  }
  self$named_buffers <- function() module_buffers(self)
  self$state_dict <- function() lapply(c(module_parameters(self), module_buffers(self, persistent_only = TRUE)), state_value)
  self$load_state_dict <- function(state_dict, strict = TRUE) load_state_dict(instance, state_dict, strict)
  self$eval <- function() { set_training(self, FALSE); invisible(instance) }
  self$train <- function(mode = TRUE) {
    if (!is.logical(mode) || length(mode) != 1 || is.na(mode))
      rf_abort("rfuse_type_error", "train()'s `mode` must be TRUE or FALSE", sys.call())
    set_training(self, mode); invisible(instance)
  }
  self$apply <- function(fn) {
    for (m in module_children(self)) m$apply(fn)
    fn(instance)
    invisible(instance)
  }
  self$add_module <- self$register_module <- function(name, module) {
    if (!is_module(module)) rf_abort("rfuse_type_error", "add_module() takes a module", sys.call())
    name <- as.character(name) # torch code passes positions (add_module(i - 1, m))
    assign(name, module, envir = self)
    # In registration order, as torch's children (and a sequential's forward) go.
    if (!name %in% self$.order) self$.order <- c(self$.order, name)
    module_changed()
    invisible(instance)
  }
  self$register_parameter <- function(name, param) {
    assign(name, nn_parameter(param), envir = self)
    module_changed()
    invisible(instance)
  }
  self$register_buffer <- function(name, tensor, persistent = TRUE) register_buffer(self, name, tensor, persistent)
  self$requires_grad_ <- function(requires_grad = TRUE) {
    if (!is.logical(requires_grad) || length(requires_grad) != 1 || is.na(requires_grad))
      rf_abort("rfuse_type_error", "requires_grad_() takes TRUE or FALSE", sys.call())
    params <- module_parameters(self)
    for (p in names(params)) {
      if (is_tensor(params[[p]])) params[[p]]@env$requires_grad <- requires_grad
      else set_parameter(self, p, nn_parameter(state_value(params[[p]]), requires_grad))
    }
    module_changed()
    invisible(instance)
  }
  # Gradients live on the parameters an optimizer took (tensors); R-array parameters have none.
  self$zero_grad <- function() {
    for (p in module_parameters(self)) if (is_tensor(p)) p@env$grad <- NULL
    invisible(instance)
  }
  self$to <- function(device = NULL, dtype = NULL) module_to(instance, device, dtype, sys.call())
  self$cuda <- function() module_to(instance, "cuda", NULL, sys.call())
  self$cpu <- function() module_to(instance, "cpu", NULL, sys.call())
}

# A module's parameters are R arrays that go to the device its inputs (or rf_default_device())
# name at every call, in the dtype the program is compiled for: $to() can only confirm that.
module_to <- function(instance, device, dtype, call) {
  if (!is.null(device)) {
    device <- torch_device(as.character(device))
    if (device != rf_default_device())
      rf_unsupported("$to", call, sprintf(paste("device = '%s': a module's parameters run where rf_default_device()",
                                                "('%s') says; set rf_default_device('%s') instead"), device,
                                          rf_default_device(), device))
  }
  if (!is.null(dtype) && !identical(dtype, "float32"))
    rf_unsupported("$to", call, sprintf("dtype = '%s': choose the compute dtype with rf_jit(model, dtype = ...) or rf_fit(..., dtype = ...)",
                                        paste(dtype, collapse = " ")))
  invisible(instance)
}

# A module's structure may have changed: jitted models find their parameter slots again.
module_changed <- function() .rf_counters$module_version <- (.rf_counters$module_version %||% 0) + 1

#' @export
`$.nn_module` <- function(x, name) get0(name, envir = attr(x, "self"), inherits = FALSE)

#' @export
`$<-.nn_module` <- function(x, name, value) {
  module_changed()
  assign(name, value, envir = attr(x, "self"))
  x
}

#' @export
`[[.nn_module` <- function(x, i, ...) {
  self <- attr(x, "self")
  if (is.character(i)) return(get0(i, envir = self, inherits = FALSE))
  kids <- names(module_children(self)) # a sequential's by position; other children after them
  if (!is.numeric(i) || length(i) != 1 || i < 1 || i > length(kids))
    rf_abort("rfuse_type_error", sprintf("index %s is out of range: the module holds %d modules (indices are 1-based)",
                                         deparse1(i), length(kids)), sys.call())
  get(kids[i], envir = self)
}

# `m[[i]]$weight$requires_grad <- FALSE` assigns back through `[[<-` (by name or position).
#' @export
`[[<-.nn_module` <- function(x, i, value) {
  self <- attr(x, "self")
  if (is.numeric(i)) {
    if (length(i) != 1 || i < 1 || i > length(self$.order))
      rf_abort("rfuse_type_error", sprintf("index %s is out of range: the module holds %d modules (indices are 1-based)",
                                           deparse1(i), length(self$.order)), sys.call())
    i <- self$.order[i]
  }
  module_changed()
  assign(as.character(i), value, envir = self)
  x
}

#' @export
length.nn_module <- function(x) {
  ord <- attr(x, "self")$.order
  if (length(ord)) length(ord) else 1L
}

#' @export
as.list.nn_module <- function(x, ...) {
  self <- attr(x, "self")
  lapply(stats::setNames(self$.order, self$.order), get, envir = self)
}

#' @export
print.nn_module <- function(x, ...) {
  p <- module_parameters(attr(x, "self"))
  cat(sprintf("<%s> %d parameter arrays, %d values\n", class(x)[1], length(p),
              sum(vapply(p, function(v) prod(t_size(v)), 0))))
  invisible(x)
}

# ---- Containers --------------------------------------------------------------------------------

# Adds modules under positional names ("0", "1", ...) as torch does, or their own names.
add_ordered <- function(self, mods) {
  if (!length(mods)) return(invisible())
  nms <- names(mods) %||% rep("", length(mods))
  for (i in seq_along(mods)) {
    m <- mods[[i]]
    if (!is_module(m))
      rf_abort("rfuse_type_error", sprintf("element %d is not a module (%s)", i, paste(class(m), collapse = "/")))
    nm <- if (nzchar(nms[i])) nms[i] else as.character(length(self$.order))
    assign(nm, m, envir = self)
    self$.order <- c(self$.order, nm)
  }
  module_changed()
}

#' Containers of modules
#'
#' `nn_sequential(...)` applies its modules in order (`!!!` splices a list of them, and a
#' trailing comma is allowed, as in torch); `nn_module_list(modules)` and
#' `nn_module_dict(dict)` hold modules for a `forward` to use (`[[i]]` 1-based, `[["name"]]`,
#' `length()`, `$append()`, `$extend()`, `$insert()`); `nn_identity()` returns its input.
#' Submodules are named "0", "1", ... by position (or by their names), so their parameters are
#' named as in torch's state dicts.
#' @param ... Modules (`nn_sequential`); a list of modules (`nn_module_list(modules)`); a named
#'   list of modules (`nn_module_dict(dict)`).
#' @return A module.
#' @examples
#' net <- nn_sequential(nn_linear(3, 4), nn_relu(), nn_linear(4, 1))
#' names(net$state_dict())
#' @name nn_containers
NULL

# list(...), or rlang's list2(...) where the call splices (`!!!layers`), names with `:=` or ends
# in an empty argument, as torch for R's containers accept: rlang is loaded only for code that
# uses its syntax.
dots_list <- function(...) {
  exprs <- as.list(substitute(list(...)))[-1L]
  bang <- function(e, n) n == 0L || (is.call(e) && identical(e[[1L]], as.name("!")) && bang(e[[2L]], n - 1L))
  for (i in seq_along(exprs)) {
    if (identical(exprs[[i]], quote(expr = ))) return(rlang::list2(...))
    e <- exprs[[i]]
    if (is.call(e) && (bang(e, 3L) || identical(e[[1L]], as.name(":=")))) return(rlang::list2(...))
  }
  list(...)
}

#' @rdname nn_containers
#' @export
nn_sequential <- nn_module("nn_sequential",
  initialize = function(...) add_ordered(self, dots_list(...)),
  forward = function(input) {
    for (nm in self$.order) input <- get(nm, envir = self)(input)
    input
  })

#' @rdname nn_containers
#' @export
nn_module_list <- nn_module("nn_module_list",
  initialize = function(modules = list()) {
    add_ordered(self, unname(modules))
    self$append <- function(module) { add_ordered(self, list(module)); invisible(self$.instance) }
    self$extend <- function(modules) { add_ordered(self, unname(modules)); invisible(self$.instance) }
    self$insert <- function(index, module) {
      mods <- lapply(self$.order, get, envir = self)
      rm(list = self$.order, envir = self)
      self$.order <- character()
      add_ordered(self, append(mods, list(module), after = index - 1L))
      invisible(self$.instance)
    }
  },
  forward = function(...) rf_abort("rfuse_type_error", "an nn_module_list has no forward: call its modules"))

#' @rdname nn_containers
#' @export
nn_module_dict <- nn_module("nn_module_dict",
  initialize = function(dict) {
    if (!is.list(dict) || (length(dict) && (is.null(names(dict)) || any(names(dict) == ""))))
      rf_abort("rfuse_type_error", "nn_module_dict() takes a named list of modules")
    add_ordered(self, dict)
  },
  forward = function(...) rf_abort("rfuse_type_error", "an nn_module_dict has no forward: call its modules"))

#' @rdname nn_containers
#' @export
nn_identity <- nn_module("nn_identity",
  forward = function(input) input)

# Every module's state, weakly held (a module no one refers to any more drops out): what an
# initializer given a parameter without its place searches (see write_back_parameter).
.rf_modules <- new.env(parent = emptyenv())
register_module_self <- function(self) {
  refs <- .rf_modules$refs
  # Now and then the collected ones are dropped, so the list stays as long as the live modules.
  if (length(refs) >= 2L * (.rf_modules$live %||% 256L)) {
    refs <- Filter(function(w) !is.null(.rf_weakref_key(w)), refs)
    .rf_modules$live <- max(256L, length(refs))
  }
  .rf_modules$refs <- c(refs, list(.rf_new_weakref(self)))
}
live_module_selves <- function() Filter(Negate(is.null), lapply(.rf_modules$refs, .rf_weakref_key))

# Arguments with (nested) lists of tensors as one flat list (names a..1, a..2, ...), a function
# rebuilding the original arguments from such a list, and a key naming the structure.
flatten_list_args <- function(args) {
  nms <- names(args) %||% rep("", length(args))
  flat <- list(); shapes <- vector("list", length(args)) # NULL: not a list
  for (i in seq_along(args)) {
    a <- args[[i]]
    if (is.list(a) && !is.object(a)) {
      items <- list_leaves(a)
      if (!all(vapply(items, function(v) is_tensor(v) || is.numeric(v) || is.logical(v), TRUE)))
        rf_unsupported("forward", NULL, sprintf("argument %s is a list holding values other than tensors", nms[i]))
      shapes[[i]] <- list(skeleton = a, n = length(items))
      flat <- c(flat, items)
    } else {
      flat <- c(flat, list(a))
    }
  }
  rebuild <- function(values) {
    out <- vector("list", length(args)); k <- 0L
    for (i in seq_along(args)) {
      sh <- shapes[[i]]
      if (is.null(sh)) { k <- k + 1L; out[i] <- list(values[[k]]); next }
      out[[i]] <- refill_leaves(sh$skeleton, values[k + seq_len(sh$n)])
      k <- k + sh$n
    }
    names(out) <- names(args)
    out
  }
  key <- paste(vapply(seq_along(args), function(i) {
    sh <- shapes[[i]]
    paste0(nms[i], "=", if (is.null(sh)) "." else deparse1(rapply(sh$skeleton, function(v) 0L, how = "replace")))
  }, ""), collapse = ",")
  list(flat = unname(flat), rebuild = rebuild, key = key)
}
list_leaves <- function(x) if (is.list(x) && !is.object(x)) do.call(c, lapply(x, list_leaves)) else list(x)
refill_leaves <- function(skeleton, values) {
  k <- 0L
  fill <- function(x) {
    if (is.list(x) && !is.object(x)) {
      for (j in seq_along(x)) x[j] <- list(fill(x[[j]]))
      return(x)
    }
    k <<- k + 1L
    values[[k]]
  }
  fill(skeleton)
}

has_list_args <- function(args) any(vapply(args, function(a) is.list(a) && !is.object(a), TRUE))
