"""Python kernels of optim.yaml: filled-like tensors and the optimizer update rules.

Each update returns new arrays (never writes into its inputs: the values it reads are the
variable store's, shared with every other reader of the step). `xp` is NumPy or CuPy.
"""


def zeros_like(xp, x):
    return xp.zeros_like(x)


def ones_like(xp, x):
    return xp.ones_like(x)


# Both read only x's shape and dtype: where those are static, constant folding runs them once on
# a stand-in (compile/fold.py) and autodiff's seeds and missing gradients cost no step.
zeros_like.shape_only = ones_like.shape_only = True


def apply_gradient_descent(xp, var, alpha, delta, out=None):
    return xp.asarray(xp.subtract(var, alpha * delta, out=out))


def apply_momentum(xp, var, accum, lr, grad, momentum, use_nesterov):
    accum = momentum * accum + grad
    step = grad + momentum * accum if use_nesterov else accum
    return xp.asarray(var - lr * step), xp.asarray(accum)


def apply_adagrad(xp, var, accum, lr, grad):
    accum = accum + grad * grad
    return xp.asarray(var - lr * grad / xp.sqrt(accum)), xp.asarray(accum)


def apply_adam(xp, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
    one = xp.ones((), dtype=var.dtype)  # keeps float32 math in float32
    lr_t = lr * xp.sqrt(one - beta2_power) / (one - beta1_power)
    m = beta1 * m + (one - beta1) * grad
    v = beta2 * v + (one - beta2) * grad * grad
    return xp.asarray(var - lr_t * m / (xp.sqrt(v) + epsilon)), xp.asarray(m), xp.asarray(v)


def apply_rms_prop(xp, var, ms, mom, lr, rho, momentum, epsilon, grad):
    one = xp.ones((), dtype=var.dtype)
    ms = rho * ms + (one - rho) * grad * grad
    mom = momentum * mom + lr * grad / xp.sqrt(ms + epsilon)
    return xp.asarray(var - mom), xp.asarray(ms), xp.asarray(mom)


def apply_adadelta(xp, var, accum, accum_update, lr, rho, epsilon, grad):
    one = xp.ones((), dtype=var.dtype)
    accum = rho * accum + (one - rho) * grad * grad
    update = xp.sqrt(accum_update + epsilon) / xp.sqrt(accum + epsilon) * grad
    accum_update = rho * accum_update + (one - rho) * update * update
    return xp.asarray(var - lr * update), xp.asarray(accum), xp.asarray(accum_update)


def apply_ftrl(xp, var, accum, linear, lr, l1, l2, l2_shrinkage, lr_power, beta, grad):
    new_accum = accum + grad * grad
    if float(lr_power) == -0.5:
        new_power, old_power = xp.sqrt(new_accum), xp.sqrt(accum)
    else:
        new_power, old_power = xp.power(new_accum, -lr_power), xp.power(accum, -lr_power)
    shrunk = grad + 2 * l2_shrinkage * var if float(l2_shrinkage) else grad
    linear = linear + shrunk - (new_power - old_power) / lr * var
    quadratic = (new_power + beta) / lr + 2 * l2
    kept = xp.abs(linear) > l1
    # where |linear| <= l1 the weight is 0 (the L1 term's dead zone)
    var = xp.where(kept, (xp.sign(linear) * l1 - linear) / xp.where(kept, quadratic, 1), 0)
    return xp.asarray(var, dtype=grad.dtype), xp.asarray(new_accum), xp.asarray(linear)


def _proximal(xp, prox, step, l1, l2):
    """The L1 and L2 proximal step: shrink toward 0 by step * l1 (0 inside), scale by
    1 / (1 + step * l2)."""
    if float(l1) > 0:
        prox = xp.sign(prox) * xp.maximum(xp.abs(prox) - step * l1, 0)
    return prox / (1 + step * l2)


def apply_proximal_gradient_descent(xp, var, lr, l1, l2, grad):
    return xp.asarray(_proximal(xp, var - lr * grad, lr, l1, l2), dtype=var.dtype)


def apply_proximal_adagrad(xp, var, accum, lr, l1, l2, grad):
    accum = accum + grad * grad
    step = lr / xp.sqrt(accum)
    return (xp.asarray(_proximal(xp, var - step * grad, step, l1, l2), dtype=var.dtype),
            xp.asarray(accum))
