package let placeholder3 = 0
