"""Host code calling helpers of another module: their kernel calls and returns are followed."""

from mimir.array import zeros

from app import helpers
from app.dims import D_IN
from app.helpers import add_bias, forward, forward_twice, make_input, make_weights
from app.layers import linear


def cpu_through_helper():
    x = zeros((8, D_IN))
    return forward(x, make_weights())  # E: GPU060


def cpu_from_helper():
    x = make_input()
    return linear(x, make_weights())  # E: GPU060


def cpu_through_module_attribute():
    return helpers.forward(zeros((8, D_IN)), make_weights())  # E: GPU060


def gpu_through_helper():
    x = zeros((8, D_IN)).to("gpu")
    forward_twice(x, make_weights())
    return forward(make_input().to("gpu"), w=make_weights())


def mixed_with_helper_result():
    return make_input() + make_weights()  # E: GPU061 GPU010


def cpu_meets_gpu_inside_helper():
    y = add_bias(zeros((8, D_IN)))  # E: GPU061
    return y * 2


def gpu_meets_gpu_inside_helper():
    return add_bias(make_input().to("gpu")) * 2
