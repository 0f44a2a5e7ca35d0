# SBML events: what readSBML() reads of them (the checks, and their math
# compiled to the engine's programs) and how lassieSimulate() runs them on
# either engine: the engine stops where a trigger changes (a watch,
# src/lassie/lassie.h), and the events' semantics (SBML Level 3, section
# 4.12) are applied here between the engine's runs.

# ---- readSBML() -------------------------------------------------------------

sbml_event_label <- function(e, k) if (nzchar(e$id)) e$id else paste0("#", k)

# Everything events assign: states of the model (species, and parameters,
# which become states of their own), never constants.
sbml_event_targets <- function(d) {
  unique(unlist(lapply(d$events, function(e) if (!is.null(e$trigger)) e$variable[!vapply(e$math, is.null, TRUE)])))
}


# The events' constructs readSBML() refuses, by event; returns the
# parameters, stoichiometries (species references' ids) and compartments
# events assign: they become states, which only events change (a
# compartment's species then keep their amounts, as SBML has it).
sbml_events_check <- function(d, refuse) {
  ar <- d$rules$variable[d$rules$type == "assignment"]
  sref <- unlist(lapply(d$reactions, function(r) c(r$reactants$id, r$products$id)))
  for (k in seq_along(d$events)) {
    e <- d$events[[k]]
    lab <- sbml_event_label(e, k)
    if (is.null(e$trigger)) next   # never triggered (sbml_events_compile())
    for (j in seq_along(e$variable)) {
      v <- e$variable[j]
      what <- function(...) refuse("an event assignment to ", v, ...,  " (event ", lab, ")")
      if (is.null(e$math[[j]])) next   # no effect (sbml_events_compile())
      if (v %in% ar) what(", which an assignment rule sets")
      i <- match(v, d$species$id); ip <- match(v, d$parameters$id); ic <- match(v, d$compartments$id)
      if (!is.na(ic)) {
        if (isTRUE(d$compartments$constant[ic])) what(", a constant compartment")
      } else if (!is.na(i)) {
        if (d$species$constant[i]) what(", a constant species")
      } else if (!is.na(ip)) {
        if (isTRUE(d$parameters$constant[ip])) what(", a constant parameter")
      } else if (nzchar(v) && v %in% sref) {
        # a species reference's stoichiometry: a state, which the
        # reactions that use it read (as one whose rate rule changes it)
      } else {
        what(", which is neither a species nor a parameter")
      }
    }
  }
  intersect(sbml_event_targets(d), c(d$parameters$id, sref, d$compartments$id))
}

# The events' math compiled by sbml_law_program() (over the states, `state_at`,
# rules that change in time substituted, time read from the state `clock`), one program table for all:
# list(events, programs = list(start, code, cval), deps).  Each event:
# id, trigger, delay, priority (program numbers, NA when absent),
# initialValue, persistent, useValuesFromTriggerTime, target (the states
# assigned, 1-based) and assign (their programs).
sbml_events_compile <- function(events, state_at, moving, value, refuse, clock, rescale_of = list()) {
  progs <- list()
  add <- function(ex, what, lab) {
    p <- tryCatch(sbml_law_program(ex, list(), state_at, moving, value, function(...) stop_input(..., call = NULL),
                                   clock),
                  error = function(e) {
                    msg <- sub("; readSBML\\(\\) does not simulate it$", "", conditionMessage(e))
                    msg <- sub("^[^ ]+\\.(xml|sbml): ", "", msg)   # (sbml_values() names the file)
                    refuse("event ", lab, ": its ", what, " (", msg, ")")
                  })
    progs[[length(progs) + 1L]] <<- p
    length(progs)
  }
  # an event without a trigger's math never triggers, an assignment
  # without math has no effect (SBML Level 3 Version 2, where math is
  # optional): both are left out; a delay or a priority without math is
  # none (the suite's cases 01241 and 01242 have them so)
  live <- which(!vapply(events, function(e) is.null(e$trigger), TRUE))
  ev <- lapply(live, function(k) {
    e <- events[[k]]
    lab <- sbml_event_label(e, k)
    e$variable <- e$variable[!vapply(e$math, is.null, TRUE)]
    e$math <- Filter(Negate(is.null), e$math)
    # A species of a compartment that rules or events resize has its amount
    # as its state (`<id>.amount`), and the assignment gives its
    # concentration: the amount is that times the size where the
    # assignment's value is taken, before the event's own assignments
    # (the suite's cases 01779 and 01780: a species and its compartment
    # assigned together).  With a delay the values may be taken at the
    # trigger and the size change before the execution: refused.
    for (j in which(!is.na(state_at(paste0(e$variable, ".amount"))))) {
      if (!is.null(e$delay)) {
        refuse("an event assignment with a delay to ", e$variable[j],
               ", a species of a compartment that rules or events resize (event ", lab, ")")
      }
      e$math[[j]] <- call("*", e$math[[j]], moving[[e$variable[j]]][[3L]])
      e$variable[j] <- paste0(e$variable[j], ".amount")
    }
    tgt <- state_at(e$variable)
    if (anyNA(tgt)) refuse("an event assignment to ", e$variable[is.na(tgt)][1], ", which is not a state (event ", lab, ")")
    list(id = lab, trigger = add(e$trigger, "trigger", lab),
         delay = if (is.null(e$delay)) NA_integer_ else add(e$delay, "delay", lab),
         priority = if (is.null(e$priority)) NA_integer_ else add(e$priority, "priority", lab),
         initialValue = isTRUE(e$initialValue), persistent = isTRUE(e$persistent),
         useValuesFromTriggerTime = isTRUE(e$useValuesFromTriggerTime),
         target = as.integer(tgt),
         # per target, the concentration states to rescale when it is a
         # compartment (lassie_event_instant())
         rescale = lapply(e$variable, function(v) as.integer(rescale_of[[v]])),
         assign = vapply(seq_along(e$variable), function(j) {
           add(e$math[[j]], paste0("assignment to ", e$variable[j]), lab)
         }, 0L))
  })
  tab <- sbml_law_table(progs)
  list(events = ev, programs = list(start = tab$start, code = tab$code, cval = tab$cval),
       deps = lapply(tab$deps, function(x) as.integer(x)))
}

# ---- lassieSimulate() -------------------------------------------------------

# A model's events as lassieSimulate() trusts them (they may have been
# edited by hand): programs over its N states, targets among them.
check_model_events <- function(ev, N) {
  bad <- function() stop_input("`model$events` must be the events readSBML() makes", call = NULL)
  if (!is.list(ev) || !is.list(ev$events) || !is.list(ev$programs) || !is.list(ev$deps)) bad()
  n_prog <- length(ev$programs$start)
  if (length(ev$deps) != n_prog) bad()
  prog_ok <- function(i, na_ok) length(i) == 1L && ((na_ok && is.na(i)) || (!is.na(i) && i >= 1 && i <= n_prog))
  for (e in ev$events) {
    if (!prog_ok(e$trigger, FALSE) || !prog_ok(e$delay, TRUE) || !prog_ok(e$priority, TRUE) ||
        length(e$target) != length(e$assign) || any(!is.finite(e$target) | e$target < 1 | e$target > N) ||
        !all(vapply(e$assign, prog_ok, TRUE, na_ok = FALSE)) ||
        (!is.null(e$rescale) && (!is.list(e$rescale) || length(e$rescale) != length(e$target) ||
                                 !all(unlist(e$rescale) %in% seq_len(N))))) bad()
  }
  invisible(ev)
}

# The simulations of a model with events (job as lassieSimulate() builds
# it; rt, it: the batch's rates and initial values; devices: the GPUs that
# share it, or 0 on the CPU).  They run in rounds: in each, every
# simulation not yet at the end runs from its time to its next stop (the
# end, or the time of its next delayed event), where the engine's watch
# stops it earlier when a trigger changes; the events are then processed
# there (lassie_event_instant()).  A round is one engine call, each
# simulation in its own window of time on the batch's output times; a
# simulation's numbers do not depend on which others share its calls.
# Returns what lassie_engine() returns (without `elapsed`): the matrices
# (or, with job$array, the array's values), stats, status and messages.
lassie_events_run <- function(job, model, rt, it, devices = 0L) {
  ev <- model$events
  M <- length(model$reactions); N <- length(model$species)
  check_model_events(ev, N)
  ev$ties <- lassie_event_ties(ev, N)
  n <- job$total
  times <- job$times; nt <- length(times); tend <- times[nt]
  trig <- vapply(ev$events, `[[`, 0L, "trigger")
  watch <- list(start = ev$programs$start[trig], code = ev$programs$code, cval = ev$programs$cval)
  run <- c(run_list(job, FALSE, devices = devices), job$settings)
  pick <- function(x, len, s) if (x$n > 1L) x$values[(s - 1) * len + seq_len(len)] else x$values
  out <- vector("list", n)
  stats <- matrix(0, 8L, n); status <- integer(n); messages <- character(n)
  segments <- numeric(n)
  # at the start: the triggers against their initialValue
  prev0 <- vapply(ev$events, `[[`, TRUE, "initialValue")
  st <- lapply(seq_len(n), function(s) {
    q <- list(x = pick(it, N, s), t = times[1L], prev = prev0, pending = list(), serial = 0L)
    lassie_event_instant(ev, q, lassie_eval_programs(ev$programs, q$x)[trig] != 0)
  })
  for (s in seq_len(n)) {
    out[[s]] <- matrix(NaN, nt, N)
    out[[s]][1L, ] <- st[[s]]$x
  }
  live <- rep(TRUE, n)
  repeat {
    live <- live & vapply(st, function(q) q$t < tend, TRUE)
    if (!any(live)) break
    tstop <- rep(NA_real_, n)
    for (s in which(live)) {
      q <- st[[s]]
      sched <- if (length(q$pending)) min(vapply(q$pending, `[[`, 0, "time")) else Inf
      tstop[s] <- min(tend, sched)
      segments[s] <- segments[s] + 1
      # each stop costs a run of the engine: events that stop it without
      # end (a trigger that an event keeps turning) end as maxSteps does
      if (job$maxSteps - stats[1L, s] - stats[2L, s] < 1 ||
          segments[s] > min(job$maxSteps, lassie_max_event_stops)) {
        status[s] <- 1L
        messages[s] <- sprintf("maxSteps (%.0f) or %d stops at events exhausted at t = %g", job$maxSteps,
                               lassie_max_event_stops, q$t)
        live[s] <- FALSE
      }
    }
    g <- which(live)
    if (!length(g)) break
    t0 <- vapply(st[g], `[[`, 0, "t")
    res <- .Call(ffi_lassie_simulate,
                 list(model = job$arr, rates = if (rt$n > 1L) unlist(lapply(g, pick, x = rt, len = M)) else rt$values,
                      initial = unlist(lapply(st[g], `[[`, "x")), times = times, obs = NULL,
                      watch = watch, attempts0 = stats[1L, g] + stats[2L, g],
                      window = as.vector(rbind(t0, tstop[g]))),
                 list(rtol = job$rtol, atol = job$atol, method = job$method, maxSteps = job$maxSteps,
                      hInit = 0, part = c(0L, length(g)), array = FALSE, output = NULL),
                 run)
    for (i in seq_along(g)) {
      s <- g[i]
      stats[, s] <- stats[, s] + res$stats[, i]
      sp <- res$sims[[i]][, 1L + seq_len(N), drop = FALSE]
      if (res$status[[i]] != 0L) {
        # the engine's rows up to its failure, NaN after it
        k <- which(times > t0[i])
        out[[s]][k, ] <- sp[k, ]
        status[s] <- res$status[[i]]; messages[s] <- res$messages[[i]]
        live[s] <- FALSE
        next
      }
      # where the engine stopped: a trigger's change, or the run's end
      halt <- res$stop
      th <- halt$t[i]
      k <- seq_len(halt$rows[i])
      k <- k[times[k] > t0[i] & times[k] < th]
      out[[s]][k, ] <- sp[k, ]
      q <- st[[s]]
      q$t <- th; q$x <- halt$x[, i]
      now <- if (halt$stopped[i]) halt$values[, i] != 0 else lassie_eval_programs(ev$programs, q$x)[trig] != 0
      q <- lassie_event_instant(ev, q, now)
      # a row at the event's time: the state after the events
      r <- match(q$t, times)
      if (!is.na(r)) out[[s]][r, ] <- q$x
      st[[s]] <- q
    }
  }
  obs <- job$obs
  sims <- lapply(out, function(o) {
    y <- if (is.null(obs)) o else cbind(o, o %*% obs)
    if (isTRUE(job$array)) y else unname(cbind(times, y))
  })
  list(sims = if (isTRUE(job$array)) unlist(sims) else sims, stats = stats, status = status,
       messages = messages)
}

lassie_max_event_stops <- 100000L

# The programs' values at one state x.
lassie_eval_programs <- function(programs, x) {
  .Call(ffi_lassie_eval_programs, programs, matrix(as.double(x), 1L))[1L, ]
}

lassie_event_refuse <- function(...) {
  stop(sbg_condition(c("sysbioGPU_sbml_unsupported", "sysbioGPU_error_input"),
                     paste0(..., "; lassieSimulate() does not simulate it")))
}

# At one time st$t, with the triggers' values `now` at the state st$x:
# the events whose trigger turned true are triggered (their delay and,
# with useValuesFromTriggerTime, their assignments' values taken now);
# events whose trigger is false lose their pending executions unless
# persistent; then the executions due now run one at a time, by priority
# (the highest first, evaluated when chosen), each followed by the
# triggers at the new state, until none is due (SBML Level 3, 4.12.6).
lassie_event_instant <- function(ev, st, now) {
  E <- ev$events
  for (n_exec in 0:10000) {
    vals <- lassie_eval_programs(ev$programs, st$x)
    for (e in which(now & !st$prev)) {
      d <- if (is.na(E[[e]]$delay)) 0 else vals[E[[e]]$delay]
      if (!is.finite(d) || d < 0) {
        lassie_event_refuse("event ", E[[e]]$id, " with a delay of ", format(d), " at t = ", format(st$t))
      }
      st$serial <- st$serial + 1L
      st$pending[[length(st$pending) + 1L]] <-
        list(e = e, time = st$t + d, serial = st$serial,
             values = if (E[[e]]$useValuesFromTriggerTime) vals[E[[e]]$assign])
    }
    st$prev <- now
    keep <- vapply(st$pending, function(p) E[[p$e]]$persistent || now[p$e], TRUE)
    st$pending <- st$pending[keep]
    due <- which(vapply(st$pending, function(p) p$time <= st$t, TRUE))
    if (!length(due)) return(st)
    k <- lassie_event_next(ev, st, due, vals)
    p <- st$pending[[k]]
    st$pending[[k]] <- NULL
    v <- if (is.null(p$values)) vals[E[[p$e]]$assign] else p$values
    tg <- E[[p$e]]$target
    before <- st$x[tg]
    st$x[tg] <- v
    # a resized compartment's species whose states are concentrations keep
    # their amounts (SBML's semantics; the suite's cases 01505 and 01506)
    for (j in seq_along(E[[p$e]]$rescale)) {
      s <- E[[p$e]]$rescale[[j]]
      if (length(s)) st$x[s] <- st$x[s] * before[j] / v[j]
    }
    if (any(!is.finite(st$x))) {
      lassie_event_refuse("event ", E[[p$e]]$id, " setting a value that is not finite at t = ", format(st$t))
    }
    now <- lassie_eval_programs(ev$programs, st$x)[vapply(E, `[[`, 0L, "trigger")] != 0
  }
  lassie_event_refuse("events that keep executing at t = ", format(st$t), " (more than 10000 executions)")
}

# Which of the due executions runs next: the highest priority; among
# equals, or where one has no priority, SBML leaves the order open (its
# RandomEventExecution), so the first in the model's order runs only when
# the order cannot matter: the events' assignments are to different
# states, and none of them changes what another reads at its execution
# (its values taken then, its priority, its trigger when not persistent)
# nor a trigger of another event (ev$ties, lassie_event_ties()).
# Otherwise the model is refused.
lassie_event_next <- function(ev, st, due, vals) {
  if (length(due) == 1L) return(due)
  E <- ev$events
  es <- vapply(st$pending[due], `[[`, 0L, "e")
  pr <- vapply(es, function(e) if (is.na(E[[e]]$priority)) NA_real_ else vals[E[[e]]$priority], 0)
  top <- if (anyNA(pr)) seq_along(due) else which(pr == max(pr))
  if (length(top) > 1L) {
    tied <- es[top]
    u <- unique(tied)
    clash <- ev$ties$clash[u, u, drop = FALSE]
    diag(clash) <- FALSE
    if (any(clash) || any(ev$ties$moves_trigger[u])) lassie_event_tie(E, tied, st$t)
    # the same event's executions in the order they were triggered
    top <- top[order(es[top], vapply(st$pending[due[top]], `[[`, 0L, "serial"))]
  }
  due[top[1L]]
}

# What lassie_event_next() asks of two tied events, once per model (states
# 1..N): clash[a, b], whether a assigns a state that b assigns too or reads
# at its execution; moves_trigger[a], whether a assigns a state that the
# trigger of another event reads.
lassie_event_ties <- function(ev, N) {
  E <- ev$events
  nE <- length(E)
  deps <- function(i) if (is.na(i)) integer() else ev$deps[[i]]
  incidence <- function(sets) {
    m <- matrix(FALSE, nE, N)
    for (e in seq_len(nE)) {
      i <- sets[[e]]
      m[e, i[i >= 1L & i <= N]] <- TRUE
    }
    m
  }
  tg <- incidence(lapply(E, `[[`, "target"))
  reads <- incidence(lapply(E, function(e) {
    c(if (!e$useValuesFromTriggerTime) unlist(lapply(e$assign, deps)), deps(e$priority),
      if (!e$persistent) deps(e$trigger))
  }))
  trig <- incidence(lapply(E, function(e) deps(e$trigger)))
  clash <- (tg + 0) %*% t((tg | reads) + 0) > 0
  readers <- colSums(trig)
  moves_trigger <- vapply(seq_len(nE), function(a) any(tg[a, ] & readers - trig[a, ] > 0), TRUE)
  list(clash = clash, moves_trigger = moves_trigger)
}

lassie_event_tie <- function(E, tied, t) {
  lassie_event_refuse("simultaneous events whose order SBML leaves open and matters (",
                      paste(unique(vapply(E[tied], `[[`, "", "id")), collapse = ", "), " at t = ", format(t), ")")
}
