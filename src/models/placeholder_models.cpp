// placeholder; replaced as the models library grows.
